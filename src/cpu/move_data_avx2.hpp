#pragma once
// move_data's loop over scattered movements with 32-byte AVX2 loads and
// stores (chosen at run time: the library is built for baseline x86-64).
// Internal to move_data.cpp.

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/move_plan.hpp"
#include "cpu/move_data_rows.hpp"

namespace mtsarray::detail::cpu {

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
// The same loop with 32-byte loads and stores where the CPU has AVX2 (as
// glibc's memcpy does), for rows of a multiple of 32 bytes: half the
// instructions of the baseline x86-64 build's 16-byte copies. The library
// itself stays built for baseline x86-64; the loop is written twice because
// code compiled for AVX2 can not be inlined into baseline code.
#define MTSARRAY_AVX2_GATHER 1
template <size_t Bytes, typename Movements>
[[gnu::noinline]] __attribute__((target("avx2"))) void copy_each_movement_avx2(const Arrays& arrays,
                                                                             const Movements& movements,
                                                                             size_t count, uint64_t rows) {
    static_assert(Bytes % 32 == 0 && Bytes != 0, "whole 32-byte chunks");
    unsigned char* const output = arrays.output;
    const unsigned char* const input = arrays.input;
    const uint64_t output_row = arrays.output_row_stride;
    const uint64_t input_row = arrays.input_row_stride;
    const bool prefetch = arrays.prefetch_inputs;
    // a local: the copies' stores could alias the caller's view
    const Movements view = movements;
    for (size_t i = 0; i < count; i++) {
        const uint64_t output_offset = view.output_offset(i);
        const uint64_t input_offset = view.input_offset(i);
        const uint64_t bytes = view.bytes(i);
        if (prefetch) {
            prefetch_later_input<Bytes>(view, i + prefetch_distance, count, input);
        }
        if (bytes == Bytes) {
            unsigned char* destination = output + output_offset;
            const unsigned char* source = input + input_offset;
            for (uint64_t row = 0; row < rows; row++) {
#pragma GCC unroll 8
                for (size_t offset = 0; offset < Bytes; offset += 32) {
                    const __m256i chunk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source + offset));
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(destination + offset), chunk);
                }
                destination += output_row;
                source += input_row;
            }
        } else if (bytes != 0) {
            copy_run(arrays, MoveRun{input_offset, output_offset, bytes, rows});
        }
    }
}
#endif

}  // namespace

}  // namespace mtsarray::detail::cpu
