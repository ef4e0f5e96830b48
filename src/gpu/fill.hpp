#pragma once
// fill: writes `count` copies of an element of 1, 2, 4, 8 or 16 bytes.
//
// Every supported element size divides 16, so the destination is the
// element's bytes repeated with period 16: byte k holds pattern[k % 16]. The
// kernel stores that pattern 16 bytes at a time from the first 16-byte
// aligned address (the pattern rotated to that address's phase, so any
// destination alignment works) and writes the at most 15 + 15 bytes before
// and after the aligned body one by one. One kernel thus serves every element
// size and alignment with full-width stores.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "gpu/host_device.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Queues the fill of `count` elements of `element_size` bytes at `data`
/// (device memory) with the element at `value` (host memory, read before
/// returning) on `stream`. Throws Error for an element size that does not
/// divide 16. The caller checks the launch with its runtime.
template <class Runtime>
void launch_fill(typename Runtime::StreamHandle stream, void* data, uint64_t count, const void* value,
                 size_t element_size);

/// Calls `visit(KernelKey)` for every kernel launch_fill may launch
/// (kernel_loading.hpp).
template <class Runtime, class Visit> void visit_fill_kernels(Visit&& visit);

// ---- implementation -------------------------------------------------------

struct FillArguments {
    unsigned char* data;
    uint64_t bytes;
    uint64_t head_bytes;  // before the first 16-byte aligned address
    uint64_t body_units;  // aligned 16-byte units after the head
    Unit16 pattern;       // byte k of the destination is byte (k % 16) of this
    Unit16 body_pattern;  // `pattern` rotated by head_bytes
};

MTSARRAY_HOST_DEVICE inline unsigned char pattern_byte(const Unit16& pattern, uint64_t offset) {
    unsigned index = static_cast<unsigned>(offset % 16);
    uint64_t word = index < 8 ? pattern.low : pattern.high;
    return static_cast<unsigned char>(word >> (8 * (index % 8)));
}

/// What thread `thread` of `threads` writes.
template <class BodyUnit>
MTSARRAY_HOST_DEVICE inline void fill_thread(const FillArguments& arguments, uint64_t thread, uint64_t thread_count) {
    static_assert(sizeof(BodyUnit) == 16, "the body pattern is 16 bytes");
    BodyUnit* body = reinterpret_cast<BodyUnit*>(arguments.data + arguments.head_bytes);
    for (uint64_t i = thread; i < arguments.body_units; i += thread_count) {
        body[i] = arguments.body_pattern;
    }

    // Ragged ends: fewer than 16 bytes each, taken by the first threads.
    if (thread < arguments.head_bytes) {
        arguments.data[thread] = pattern_byte(arguments.pattern, thread);
    }
    const uint64_t tail_start = arguments.head_bytes + 16 * arguments.body_units;
    if (thread < arguments.bytes - tail_start) {
        const uint64_t offset = tail_start + thread;
        arguments.data[offset] = pattern_byte(arguments.pattern, offset);
    }
}

#if MTSARRAY_DEVICE_COMPILER
// A template (on the body's store unit) so that every translation unit that
// includes this header shares one definition of the kernel.
template <class BodyUnit>
__global__ void __launch_bounds__(threads_per_block) fill_kernel(FillArguments arguments) {
    fill_thread<BodyUnit>(arguments, uint64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                          uint64_t(gridDim.x) * blockDim.x);
}
#endif

/// Tag of fill_kernel<BodyUnit> (KernelKey).
template <class BodyUnit> struct FillKernel;

template <class Runtime, class BodyUnit> KernelKey fill_kernel_key() {
    return MTSARRAY_KERNEL_KEY(Runtime, FillKernel<BodyUnit>, fill_kernel<BodyUnit>);
}

template <class Runtime, class Visit> void visit_fill_kernels(Visit&& visit) {
    visit(fill_kernel_key<Runtime, Unit16>());
}

inline Unit16 make_unit16(const unsigned char (&bytes)[16]) {
    Unit16 unit;
    std::memcpy(&unit, bytes, sizeof(unit));
    return unit;
}

template <class Runtime>
void launch_fill(typename Runtime::StreamHandle stream, void* data, uint64_t count, const void* value,
                 size_t element_size) {
    MTSARRAY_EXPECTS(element_size != 0 && element_size <= 16 && 16 % element_size == 0,
                     "fill: unsupported element size " + std::to_string(element_size) +
                         " (expected 1, 2, 4, 8 or 16 bytes)");
    if (count == 0) {
        return;
    }

    const unsigned char* element = static_cast<const unsigned char*>(value);
    unsigned char pattern[16];
    for (size_t i = 0; i < 16; i++) {
        pattern[i] = element[i % element_size];
    }

    FillArguments arguments;
    arguments.data = static_cast<unsigned char*>(data);
    arguments.bytes = count * element_size;
    const uint64_t address = reinterpret_cast<uintptr_t>(data);
    const uint64_t to_aligned = (16 - address % 16) % 16;
    arguments.head_bytes = to_aligned < arguments.bytes ? to_aligned : arguments.bytes;
    arguments.body_units = (arguments.bytes - arguments.head_bytes) / 16;

    unsigned char rotated[16];
    for (size_t i = 0; i < 16; i++) {
        rotated[i] = pattern[(arguments.head_bytes + i) % 16];
    }
    arguments.pattern = make_unit16(pattern);
    arguments.body_pattern = make_unit16(rotated);

    // The ragged ends need at least 15 threads even when the body is empty.
    const uint64_t threads = arguments.body_units > 16 ? arguments.body_units : 16;
    const GridShape shape{grid_size(threads, threads_per_block), threads_per_block};
    if constexpr (Runtime::kernels_run_on_host) {
        Runtime::run_grid(
            stream, fill_kernel_key<Runtime, Unit16>(), shape,
            [arguments](const GridThread& thread) { fill_thread<Unit16>(arguments, thread.global(), thread.count()); },
            {}, {arguments.data});
    } else {
#if MTSARRAY_DEVICE_COMPILER
        fill_kernel<Unit16><<<shape.blocks, shape.block_x, 0, stream>>>(arguments);
#else
        static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
