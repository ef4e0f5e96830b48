#pragma once
// move_data: executes a whole MovePlan in one kernel launch, whatever the
// number of runs and their lengths. What each thread does is
// move_data_thread.hpp; the table format and its size classes are
// move_data_table.hpp.
//
// The table. Up to inline_move_table_capacity entries travel inside the
// kernel parameters (<= 4 KiB in total with the arguments, the limit that
// holds on HIP and on older CUDA) and are staged in shared memory by each
// block (teams read entries at divergent indices, which parameter memory
// serves poorly). Larger tables are read from device memory: uploaded by
// the call, or prepared once by a reusable plan, or -- under graph capture
// -- uploaded by a memcpy node of the graph into memory the graph keeps
// alive (gpu_backend.hpp).

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "gpu/host_device.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_data_thread.hpp"

namespace mtsarray::detail {
namespace gpu {

/// A table small enough to travel in the kernel parameters.
struct InlineMoveTable {
    MoveTableEntry entries[inline_move_table_capacity];
};
static_assert(sizeof(InlineMoveTable) + sizeof(MoveDataArguments) <= 4096,
              "kernel parameters must fit in 4 KiB on every runtime");

/// Queues the move described by `arguments` on `stream`, in `blocks`
/// blocks, reading the host table `host_entries` (`entry_count` <=
/// inline_move_table_capacity entries, copied into the launch); `narrow`:
/// 32-bit offsets (narrow_offsets()).
template <class Runtime>
void launch_move_data(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, uint64_t entry_count, unsigned blocks, bool narrow);

/// Same with a table already in device memory (any number of entries); the
/// table must stay allocated until the kernel has run.
template <class Runtime>
void launch_move_data_with_device_table(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, unsigned blocks, bool narrow);

/// Calls `visit(KernelKey)` for every kernel the two launchers above may
/// launch (kernel_loading.hpp).
template <class Runtime, class Visit> void visit_move_data_kernels(Visit&& visit);

// ---- implementation -------------------------------------------------------

// Four resident blocks per SM (at most 64 registers per thread, 50%
// occupancy): sm_90 `-Xptxas -v` (CUDA 13.0) gives 56 to 62 registers and
// no spill for the four kernels, 32- and 64-bit offsets (move_data_thread.hpp
// says what keeps them there). 1024 threads with 4 units of 16 bytes in
// flight each keep 64 KiB of loads in flight per SM, above the ~20 KiB an
// H100 needs to cover its DRAM latency (3.35 TB/s x ~0.8 us / 132 SMs).
// (HIP reads the second bound as waves per EU: 4 leaves 128 VGPRs there.)
constexpr unsigned move_data_min_blocks = 4;

#if MTSARRAY_DEVICE_COMPILER
template <bool Narrow>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_inline_kernel(InlineMoveTable table, uint32_t entry_count, MoveDataArguments arguments) {
    __shared__ MoveTableEntry entries[inline_move_table_capacity];
    for (uint32_t i = threadIdx.x; i < entry_count; i += threads_per_block) {
        entries[i] = table.entries[i];
    }
    __syncthreads();
    move_data_thread<Narrow>(entries, arguments, blockIdx.x, threadIdx.x);
}

template <bool Narrow>
__global__ void __launch_bounds__(threads_per_block, move_data_min_blocks)
    move_data_device_table_kernel(const MoveTableEntry* __restrict__ entries, MoveDataArguments arguments) {
    move_data_thread<Narrow>(entries, arguments, blockIdx.x, threadIdx.x);
}
#endif

/// Tags of move_data_inline_kernel<Narrow> and
/// move_data_device_table_kernel<Narrow> (KernelKey).
template <bool Narrow> struct MoveDataInlineKernel;
template <bool Narrow> struct MoveDataDeviceTableKernel;

template <class Runtime, bool Narrow> KernelKey move_data_inline_kernel_key() {
    return MTSARRAY_KERNEL_KEY(Runtime, MoveDataInlineKernel<Narrow>, move_data_inline_kernel<Narrow>);
}

template <class Runtime, bool Narrow> KernelKey move_data_device_table_kernel_key() {
    return MTSARRAY_KERNEL_KEY(Runtime, MoveDataDeviceTableKernel<Narrow>, move_data_device_table_kernel<Narrow>);
}

template <class Runtime, class Visit> void visit_move_data_kernels(Visit&& visit) {
    visit(move_data_inline_kernel_key<Runtime, false>());
    visit(move_data_inline_kernel_key<Runtime, true>());
    visit(move_data_device_table_kernel_key<Runtime, false>());
    visit(move_data_device_table_kernel_key<Runtime, true>());
}

template <class Runtime>
void launch_move_data(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                      const MoveTableEntry* host_entries, uint64_t entry_count, unsigned blocks, bool narrow) {
    MTSARRAY_EXPECTS(entry_count <= inline_move_table_capacity,
                     "move_data: " + std::to_string(entry_count) + " entries do not fit in the kernel parameters");
    if (entry_count == 0 || blocks == 0) {
        return;
    }
    InlineMoveTable table{};
    for (uint64_t i = 0; i < entry_count; i++) {
        table.entries[i] = host_entries[i];
    }
    const GridShape shape{blocks, threads_per_block};
    auto launch = [&](auto narrow_constant) {
        constexpr bool Narrow = decltype(narrow_constant)::value;
        if constexpr (Runtime::kernels_run_on_host) {
            // the table travels by value, as in the kernel's parameters
            Runtime::run_grid(
                stream, move_data_inline_kernel_key<Runtime, Narrow>(), shape,
                [table, arguments](const GridThread& thread) {
                    move_data_thread<Narrow>(table.entries, arguments, thread.block, thread.x);
                },
                {arguments.input}, {arguments.output});
        } else {
#if MTSARRAY_DEVICE_COMPILER
            move_data_inline_kernel<Narrow><<<shape.blocks, shape.block_x, 0, stream>>>(
                table, static_cast<uint32_t>(entry_count), arguments);
#else
            static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
        }
    };
    if (narrow) {
        launch(std::true_type{});
    } else {
        launch(std::false_type{});
    }
}

template <class Runtime>
void launch_move_data_with_device_table(typename Runtime::StreamHandle stream, const MoveDataArguments& arguments,
                                        const MoveTableEntry* device_entries, unsigned blocks, bool narrow) {
    if (blocks == 0) {
        return;
    }
    const GridShape shape{blocks, threads_per_block};
    auto launch = [&](auto narrow_constant) {
        constexpr bool Narrow = decltype(narrow_constant)::value;
        if constexpr (Runtime::kernels_run_on_host) {
            Runtime::run_grid(
                stream, move_data_device_table_kernel_key<Runtime, Narrow>(), shape,
                [device_entries, arguments](const GridThread& thread) {
                    move_data_thread<Narrow>(device_entries, arguments, thread.block, thread.x);
                },
                {arguments.input, device_entries}, {arguments.output});
        } else {
#if MTSARRAY_DEVICE_COMPILER
            move_data_device_table_kernel<Narrow><<<shape.blocks, shape.block_x, 0, stream>>>(device_entries,
                                                                                               arguments);
#else
            static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
        }
    };
    if (narrow) {
        launch(std::true_type{});
    } else {
        launch(std::false_type{});
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
