#pragma once
// Transposes with AVX2 (chosen at run time: the library is built for
// baseline x86-64). Internal to strided_copy.cpp.

#include <cstdint>

#include "cpu/strided_copy_sse2.hpp"
#include "cpu/strided_copy_transpose.hpp"

namespace mtsarray::detail::cpu {

namespace {

#if defined(MTSARRAY_X86_TRANSPOSES)
// 8-byte elements where the CPU has AVX2 (the library itself is built for
// baseline x86-64, so this is chosen at run time): 4x4 blocks, two above
// each other per step, so that every destination row written gets 64
// bytes, a whole cache line, per step, and every source row is read 32
// bytes at a time. Strips are 128 elements wide (1 KiB of each source
// row). It beats the 2x2 SSE2 kernel on every float64 transpose of the
// "swap_axes f64" rows of mtsarray-bench (1.3-1.6x on 1000x1000).
[[gnu::always_inline]] __attribute__((target("avx2"))) inline void transpose_4x4(const unsigned char* source,
                                                                               int64_t row,
                                                                               unsigned char* destination,
                                                                               int64_t column) {
    const auto* s = reinterpret_cast<const double*>(source);
    const __m256d r0 = _mm256_loadu_pd(s);
    const __m256d r1 = _mm256_loadu_pd(reinterpret_cast<const double*>(source + row));
    const __m256d r2 = _mm256_loadu_pd(reinterpret_cast<const double*>(source + 2 * row));
    const __m256d r3 = _mm256_loadu_pd(reinterpret_cast<const double*>(source + 3 * row));
    const __m256d even_01 = _mm256_unpacklo_pd(r0, r1);  // r0[0] r1[0] r0[2] r1[2]
    const __m256d odd_01 = _mm256_unpackhi_pd(r0, r1);   // r0[1] r1[1] r0[3] r1[3]
    const __m256d even_23 = _mm256_unpacklo_pd(r2, r3);
    const __m256d odd_23 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(reinterpret_cast<double*>(destination), _mm256_permute2f128_pd(even_01, even_23, 0x20));
    _mm256_storeu_pd(reinterpret_cast<double*>(destination + column), _mm256_permute2f128_pd(odd_01, odd_23, 0x20));
    _mm256_storeu_pd(reinterpret_cast<double*>(destination + 2 * column),
                     _mm256_permute2f128_pd(even_01, even_23, 0x31));
    _mm256_storeu_pd(reinterpret_cast<double*>(destination + 3 * column),
                     _mm256_permute2f128_pd(odd_01, odd_23, 0x31));
}

// One step: 8 source rows by 4 columns.
struct Blocks8Avx2 {
    __attribute__((target("avx2"))) void operator()(const unsigned char* block, int64_t row, unsigned char* out,
                                                    int64_t column) const {
        transpose_4x4(block, row, out, column);
        transpose_4x4(block + 4 * row, row, out + 32, column);
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) void copy_strip(const Transpose& t, const Blocks8Avx2& blocks,
                                                                unsigned char* destination,
                                                                const unsigned char* source, uintptr_t begin,
                                                                uintptr_t end) {
    copy_in_blocks<8, 8, 4>(t, destination, source, begin, end, blocks);
}

// 4-byte elements where the CPU has AVX2 (rows not sharing cache sets):
// 8x8 blocks, 8 source rows read 32 bytes each, 24 shuffles, 8 destination
// rows written 32 bytes each; half the loads, stores and shuffles per byte
// of Blocks4's two 4x4 SSE2 blocks: 1.3x Blocks4 on the "swap_axes f32
// 1000x1000 [1 thread]" row of mtsarray-bench, never slower on the others.
struct Blocks4Avx2 {
    __attribute__((target("avx2"))) void operator()(const unsigned char* block, int64_t row, unsigned char* out,
                                                    int64_t column) const {
        __m256 r[8];
        for (int k = 0; k < 8; k++) {
            r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(block + k * row));
        }
        __m256 t[8];
        for (int k = 0; k < 4; k++) {
            t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
        }
        __m256 q[8];
        for (int h = 0; h < 2; h++) {
            q[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(1, 0, 1, 0));
            q[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(3, 2, 3, 2));
            q[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(1, 0, 1, 0));
            q[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int c = 0; c < 4; c++) {
            _mm256_storeu_ps(reinterpret_cast<float*>(out + c * column), _mm256_permute2f128_ps(q[c], q[4 + c], 0x20));
            _mm256_storeu_ps(reinterpret_cast<float*>(out + (c + 4) * column),
                             _mm256_permute2f128_ps(q[c], q[4 + c], 0x31));
        }
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) void copy_strip(const Transpose& t, const Blocks4Avx2& blocks,
                                                                unsigned char* destination,
                                                                const unsigned char* source, uintptr_t begin,
                                                                uintptr_t end) {
    copy_in_blocks<4, 8, 8>(t, destination, source, begin, end, blocks);
}
#endif

}  // namespace

}  // namespace mtsarray::detail::cpu
