#pragma once
// move_data: executes a whole MovePlan in one kernel launch, whatever the
// number of runs.
//
// Work split. The plan's bytes are seen as one flat sequence of units (see
// move_data_table.hpp): run after run, row after row, `width` bytes each,
// where `width` is the widest power of two (<= 16) dividing every offset,
// length and stride of the plan and both base addresses. Blocks take chunks
// of consecutive units (threads_per_block * units_per_thread), consecutive
// threads taking consecutive units. So a long row is spread over many warps
// with fully coalesced 16-byte accesses, and many short rows or short runs
// share one warp with no idle lanes: load balance does not depend on how the
// bytes are split into runs.
//
// Finding the run. Each block finds the first and last run of its chunk by
// binary search with block-uniform indices (broadcast loads), then each
// thread searches only that range, starting from the run of its previous
// unit; when the chunk lies inside one run (the common case) no per-unit
// search happens at all. The unit -> (row, column) split is skipped for
// single-row runs and uses 32-bit division whenever the numbers fit.
//
// The table. Up to inline_move_table_capacity runs travel inside the kernel
// parameters (<= 4 KiB in total, the limit that holds on HIP and on older
// CUDA) and are copied to shared memory by each block, so no upload is
// needed. Larger tables are read from device memory that the caller uploads
// (stream-ordered, see gpu_backend.hpp).

#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"
#include "kernel_language.hpp"
#include "launch_config.hpp"
#include "move_data_table.hpp"
#include "vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Everything a move_data kernel needs besides the table.
struct MoveDataArguments {
    const unsigned char* input;
    unsigned char* output;
    uint64_t input_row_stride;   // bytes
    uint64_t output_row_stride;  // bytes
    uint64_t total_units;        // returned by write_move_table
    uint32_t run_count;          // table entries, at least one
};

/// Largest table passed by value (kernel parameters stay within 4 KiB).
constexpr uint32_t inline_move_table_capacity = 120;

/// A table small enough to travel in the kernel parameters.
struct InlineMoveTable {
    MoveTableEntry entries[inline_move_table_capacity];
};
static_assert(sizeof(InlineMoveTable) + sizeof(MoveDataArguments) <= 4096,
              "kernel parameters must fit in 4 KiB on every runtime");

/// Queues the plan described by `arguments` and the host table `entries`
/// (arguments.run_count <= inline_move_table_capacity entries, copied into
/// the launch) on `stream`, moving units of `width` bytes.
template <class NativeStream>
void launch_move_data(NativeStream stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, size_t width);

/// Same with a table already in device memory (any number of entries); the
/// table must stay allocated until the kernel has run (free it stream-ordered
/// on the same stream).
template <class NativeStream>
void launch_move_data_with_device_table(NativeStream stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, size_t width);

// ---- implementation -------------------------------------------------------

/// Units each thread moves per chunk: 64 bytes in flight per thread at
/// widths 8 and 16; narrower widths keep 8 units, enough to amortise the run
/// search without the registers (and lost occupancy) of more.
template <size_t Width>
constexpr unsigned move_units_per_thread = Width >= 16 ? 4u : 8u;

/// Last index i in [low, high] with entries[i].first_unit <= unit, given
/// that entries[low].first_unit <= unit.
__device__ inline uint32_t find_run(const MoveTableEntry* entries, uint32_t low, uint32_t high,
                                    uint64_t unit) {
    while (low < high) {
        const uint32_t middle = low + (high - low + 1) / 2;
        if (entries[middle].first_unit <= unit) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    return low;
}

/// (row, column) of unit `local` of a run with `units_per_row` units a row.
__device__ inline void split_unit(uint64_t local, uint64_t units_per_row, uint64_t& row,
                                  uint64_t& column) {
    if (local < units_per_row) {
        row = 0;
        column = local;
    } else if (((local | units_per_row) >> 32) == 0) {
        const uint32_t narrow_row = static_cast<uint32_t>(local) / static_cast<uint32_t>(units_per_row);
        row = narrow_row;
        column = local - row * units_per_row;
    } else {
        row = local / units_per_row;
        column = local - row * units_per_row;
    }
}

/// The loop shared by both table kinds; `entries` is in shared memory
/// (inline table) or global memory (device table).
template <size_t Width>
__device__ inline void move_data_chunks(const MoveTableEntry* __restrict__ entries,
                                        const MoveDataArguments& arguments) {
    using Unit = unit_t<Width>;
    constexpr unsigned per_thread = move_units_per_thread<Width>;
    constexpr uint64_t chunk_units = uint64_t(threads_per_block) * per_thread;
    const uint32_t last_run = arguments.run_count - 1;

    for (uint64_t chunk = uint64_t(blockIdx.x) * chunk_units; chunk < arguments.total_units;
         chunk += uint64_t(gridDim.x) * chunk_units) {
        const uint64_t remaining = arguments.total_units - chunk;
        const uint64_t chunk_end = chunk + (remaining < chunk_units ? remaining : chunk_units);
        // Block-uniform searches: every lane reads the same entry.
        const uint32_t chunk_first_run = find_run(entries, 0, last_run, chunk);
        const uint32_t chunk_last_run = find_run(entries, chunk_first_run, last_run, chunk_end - 1);

        // All loads first, then all stores: per_thread independent loads in
        // flight per thread hide the memory latency.
        Unit values[per_thread];
        Unit* targets[per_thread];
        uint32_t run = chunk_first_run;
#pragma unroll
        for (unsigned k = 0; k < per_thread; k++) {
            const uint64_t unit = chunk + uint64_t(k) * threads_per_block + threadIdx.x;
            targets[k] = nullptr;
            if (unit < chunk_end) {
                if (run != chunk_last_run) {
                    run = find_run(entries, run, chunk_last_run, unit);
                }
                const MoveTableEntry entry = entries[run];
                uint64_t row;
                uint64_t column;
                split_unit(unit - entry.first_unit, entry.units_per_row, row, column);
                const Unit* source = reinterpret_cast<const Unit*>(
                    arguments.input + entry.input_offset + row * arguments.input_row_stride);
                targets[k] = reinterpret_cast<Unit*>(
                    arguments.output + entry.output_offset + row * arguments.output_row_stride);
                targets[k] += column;
                values[k] = source[column];
            }
        }
#pragma unroll
        for (unsigned k = 0; k < per_thread; k++) {
            if (targets[k] != nullptr) {
                *targets[k] = values[k];
            }
        }
    }
}

// At least two resident blocks per SM: left alone, ptxas squeezes some widths
// to 64 registers and spills. (HIP reads the second bound as waves per EU;
// 2 constrains nothing there.)
constexpr unsigned move_data_min_blocks = 2;

template <size_t Width>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_inline_kernel(InlineMoveTable table, MoveDataArguments arguments) {
    // Kernel parameters only broadcast well for uniform indices; the
    // per-thread searches read divergent entries, so stage the table in
    // shared memory once per block.
    __shared__ MoveTableEntry entries[inline_move_table_capacity];
    for (uint32_t i = threadIdx.x; i < arguments.run_count; i += threads_per_block) {
        entries[i] = table.entries[i];
    }
    __syncthreads();
    move_data_chunks<Width>(entries, arguments);
}

template <size_t Width>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_device_table_kernel(const MoveTableEntry* __restrict__ entries,
                                  MoveDataArguments arguments) {
    move_data_chunks<Width>(entries, arguments);
}

template <size_t Width> unsigned move_data_grid(const MoveDataArguments& arguments) {
    constexpr uint64_t chunk_units = uint64_t(threads_per_block) * move_units_per_thread<Width>;
    return grid_size(arguments.total_units, chunk_units);
}

template <class NativeStream>
void launch_move_data(NativeStream stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, size_t width) {
    MTSARRAY_EXPECTS(arguments.run_count >= 1 && arguments.run_count <= inline_move_table_capacity,
                     "move_data: " + std::to_string(arguments.run_count) +
                         " runs do not fit in the kernel parameters");
    if (arguments.total_units == 0) {
        return;
    }
    InlineMoveTable table{};
    for (uint32_t i = 0; i < arguments.run_count; i++) {
        table.entries[i] = host_entries[i];
    }
    with_unit_width(width, [&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        move_data_inline_kernel<Width>
            <<<move_data_grid<Width>(arguments), threads_per_block, 0, stream>>>(table, arguments);
    });
}

template <class NativeStream>
void launch_move_data_with_device_table(NativeStream stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, size_t width) {
    MTSARRAY_EXPECTS(arguments.run_count >= 1, "move_data: empty run table");
    if (arguments.total_units == 0) {
        return;
    }
    with_unit_width(width, [&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        move_data_device_table_kernel<Width>
            <<<move_data_grid<Width>(arguments), threads_per_block, 0, stream>>>(device_entries,
                                                                                 arguments);
    });
}

}  // namespace gpu
}  // namespace mtsarray::detail
