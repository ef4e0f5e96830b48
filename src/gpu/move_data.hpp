#pragma once
// move_data: executes a whole MovePlan in one kernel launch, whatever the
// number of runs. What each thread does is move_data_thread.hpp; the table
// format is move_data_table.hpp.
//
// The table. Up to inline_move_table_capacity entries travel inside the
// kernel parameters (<= 4 KiB in total, the limit that holds on HIP and on
// older CUDA) and are staged in shared memory by each block (the teams read
// entries at divergent indices, which parameter memory serves poorly).
// Larger tables are read from device memory the caller uploads. On a stream
// that is capturing a graph the caller launches the table in slices of the
// inline capacity instead: each slice then lives in its kernel node, for as
// long as the graph.

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "gpu/host_device.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_data_thread.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// A table small enough to travel in the kernel parameters.
struct InlineMoveTable {
    MoveTableEntry entries[inline_move_table_capacity];
};
static_assert(sizeof(InlineMoveTable) + sizeof(MoveDataArguments) <= 4096,
              "kernel parameters must fit in 4 KiB on every runtime");

/// Queues the plan described by `arguments` and the host table `entries`
/// (arguments.entry_count <= inline_move_table_capacity, copied into the
/// launch) on `stream`, moving units of `width` bytes.
template <class Runtime>
void launch_move_data(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, size_t width);

/// Same with a table already in device memory (any number of entries); the
/// table must stay allocated until the kernel has run (free it stream-ordered
/// on the same stream).
template <class Runtime>
void launch_move_data_with_device_table(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, size_t width);

// ---- implementation -------------------------------------------------------

// At least two resident blocks per SM: left alone, ptxas may squeeze a width
// to few registers and spill. (HIP reads the second bound as waves per EU;
// 2 constrains nothing there.)
constexpr unsigned move_data_min_blocks = 2;

#if MTSARRAY_DEVICE_COMPILER
template <size_t Width>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_inline_kernel(InlineMoveTable table, MoveDataArguments arguments) {
    __shared__ MoveTableEntry entries[inline_move_table_capacity];
    for (uint32_t i = threadIdx.x; i < arguments.entry_count; i += threads_per_block) {
        entries[i] = table.entries[i];
    }
    __syncthreads();
    const uint64_t thread = uint64_t(blockIdx.x) * threads_per_block + threadIdx.x;
    move_data_thread<Width>(entries, arguments, thread, uint64_t(gridDim.x) * threads_per_block);
}

template <size_t Width>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_device_table_kernel(const MoveTableEntry* __restrict__ entries, MoveDataArguments arguments) {
    const uint64_t thread = uint64_t(blockIdx.x) * threads_per_block + threadIdx.x;
    move_data_thread<Width>(entries, arguments, thread, uint64_t(gridDim.x) * threads_per_block);
}
#endif

/// Blocks for one team per entry (teams are at most a warp, so a block holds
/// a whole number of them).
inline unsigned move_data_grid(const MoveDataArguments& arguments) {
    const uint64_t teams_per_block = threads_per_block >> arguments.team_log2;
    return grid_size(arguments.entry_count, teams_per_block);
}

template <class Runtime>
void launch_move_data(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, size_t width) {
    MTSARRAY_EXPECTS(arguments.entry_count <= inline_move_table_capacity,
                     "move_data: " + std::to_string(arguments.entry_count) +
                         " entries do not fit in the kernel parameters");
    if (arguments.entry_count == 0) {
        return;
    }
    InlineMoveTable table{};
    for (uint32_t i = 0; i < arguments.entry_count; i++) {
        table.entries[i] = host_entries[i];
    }
    const GridShape shape{move_data_grid(arguments), threads_per_block};
    with_unit_width(width, [&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        if constexpr (Runtime::kernels_run_on_host) {
            // the table travels by value, as in the kernel's parameters
            // (no shared-memory staging on the host)
            Runtime::run_grid(
                stream, shape,
                [table, arguments](const GridThread& thread) {
                    move_data_thread<Width>(table.entries, arguments, thread.global(), thread.count());
                },
                {arguments.input, arguments.output});
        } else {
#if MTSARRAY_DEVICE_COMPILER
            move_data_inline_kernel<Width><<<shape.blocks, shape.block_x, 0, stream>>>(table, arguments);
#else
            static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
        }
    });
}

template <class Runtime>
void launch_move_data_with_device_table(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, size_t width) {
    if (arguments.entry_count == 0) {
        return;
    }
    const GridShape shape{move_data_grid(arguments), threads_per_block};
    with_unit_width(width, [&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        if constexpr (Runtime::kernels_run_on_host) {
            Runtime::run_grid(
                stream, shape,
                [device_entries, arguments](const GridThread& thread) {
                    move_data_thread<Width>(device_entries, arguments, thread.global(), thread.count());
                },
                {arguments.input, arguments.output, device_entries});
        } else {
#if MTSARRAY_DEVICE_COMPILER
            move_data_device_table_kernel<Width><<<shape.blocks, shape.block_x, 0, stream>>>(device_entries, arguments);
#else
            static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
        }
    });
}

}  // namespace gpu
}  // namespace mtsarray::detail
