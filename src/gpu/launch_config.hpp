#pragma once
// Launch shapes shared by every launcher in src/gpu. They are fixed numbers
// rather than device queries because src/gpu makes no runtime calls; every
// kernel loops grid-stride, so the grid cap only bounds the launch, never the
// amount of work.
//
// How a kernel is launched. Under a device compiler, a launcher queues its
// `__global__` wrapper with `<<<>>>` (CUDA, HIP). A runtime whose traits say
// `kernels_run_on_host` (the simulated runtime of the tests) is instead
// handed the grid's shape and the kernel's per-thread body, written
// MTSARRAY_HOST_DEVICE and shared with the wrapper:
//
//   template <class Body>
//   static void run_grid(StreamHandle, KernelKey kernel, const GridShape&, Body body,
//                        std::initializer_list<const void*> read,
//                        std::initializer_list<const void*> written);
//
// which queues `body(GridThread)` for every thread of the grid on the stream
// (`read`, `written`: the memory the kernel reads and the memory it writes,
// for the runtime's checks; `kernel`: which kernel this is, see KernelKey). Either way the
// launch is checked with MTSARRAY_CHECKED_LAUNCH.

#include <cstdint>

#include "gpu/host_device.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Which kernel (one instantiation of a kernel template) a launch or a load
/// is about: under a device compiler, the address of its `__global__`
/// function, the handle CUDA and HIP load and describe it by; on a runtime
/// whose kernels run on the host, the address of a tag of its own
/// (host_kernel_key). kernel_loading.hpp loads every kernel of the library
/// by these keys when a device is set up.
using KernelKey = const void*;

/// The key of the kernel named by the tag type `Kernel` on a runtime whose
/// kernels run on the host: one address per tag type.
template <class Kernel> struct HostKernelKey {
    static constexpr char tag = 0;
};
template <class Kernel> constexpr KernelKey host_kernel_key() { return &HostKernelKey<Kernel>::tag; }

/// The key of `kernel` (a `__global__` function, which exists under a device
/// compiler only) on `Runtime`, whose tag type on a host runtime is `Tag`.
#if MTSARRAY_DEVICE_COMPILER
#define MTSARRAY_KERNEL_KEY(Runtime, Tag, kernel)                                            \
    (Runtime::kernels_run_on_host ? ::mtsarray::detail::gpu::host_kernel_key<Tag>()         \
                                  : reinterpret_cast<::mtsarray::detail::gpu::KernelKey>(kernel))
#else
#define MTSARRAY_KERNEL_KEY(Runtime, Tag, kernel) ::mtsarray::detail::gpu::host_kernel_key<Tag>()
#endif

/// Threads per block of the one-dimensional kernels (fill, move_data,
/// general strided copy): a multiple of both the 32-wide CUDA warp and the
/// 64-wide AMD wavefront.
constexpr unsigned threads_per_block = 256;

/// Grid cap. HIP limits gridDim.x * blockDim.x to 2^32 threads; 2^16 blocks
/// of 256 threads stay well inside it and still fill any current GPU many
/// times over.
constexpr uint64_t max_blocks = uint64_t(1) << 16;

constexpr uint64_t ceil_div(uint64_t numerator, uint64_t denominator) {
    return (numerator + denominator - 1) / denominator;
}

/// The shape of a launch: one-dimensional grids of one- or two-dimensional
/// blocks.
struct GridShape {
    unsigned blocks;
    unsigned block_x;
    unsigned block_y = 1;
};

/// One thread of a launch, as the kernel wrappers see it through blockIdx,
/// threadIdx, gridDim and blockDim.
struct GridThread {
    unsigned block;
    unsigned x;
    unsigned y;
    GridShape shape;

    /// Index among all threads of the grid (one-dimensional blocks).
    MTSARRAY_HOST_DEVICE uint64_t global() const { return uint64_t(block) * shape.block_x + x; }
    /// Threads in the grid (one-dimensional blocks).
    MTSARRAY_HOST_DEVICE uint64_t count() const { return uint64_t(shape.blocks) * shape.block_x; }
};

/// Blocks for `work_units` units of which one block handles `units_per_block`
/// per grid-stride step: at least one, at most max_blocks.
inline unsigned grid_size(uint64_t work_units, uint64_t units_per_block) {
    uint64_t blocks = ceil_div(work_units, units_per_block);
    if (blocks == 0) {
        blocks = 1;
    }
    if (blocks > max_blocks) {
        blocks = max_blocks;
    }
    return static_cast<unsigned>(blocks);
}

}  // namespace gpu
}  // namespace mtsarray::detail
