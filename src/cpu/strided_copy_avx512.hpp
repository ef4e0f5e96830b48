#pragma once
// Transposes with AVX-512 tiles, for rows that share cache sets (chosen at
// run time). Internal to strided_copy.cpp.

#include <cstdint>

#include "cpu/strided_copy_sse2.hpp"
#include "cpu/strided_copy_transpose.hpp"

namespace mtsarray::detail::cpu {

namespace {

#if defined(MTSARRAY_X86_TRANSPOSES)
// 4-byte elements whose rows share cache sets (see Tiles4), where the CPU
// has AVX-512: each 16x16 tile is 16 source lines read whole, one 64-byte
// load each, transposed in registers and written as 16 whole destination
// lines. No line is read or written twice and no buffer is needed: 1.4-1.8x
// Tiles4 on the "swap_axes f32 1024x1024" rows of mtsarray-bench. Not used
// for other shapes: on 1000x1000 float32 it is slower than Blocks4.

// GCC 12's AVX-512 intrinsics fill their unused mask operand with a
// self-initialised variable, which its own -Wmaybe-uninitialized then
// reports at every use (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void transpose_16x16_floats(
    const unsigned char* source, int64_t row, unsigned char* destination, int64_t column) {
    __m512 rows[16];
    for (int k = 0; k < 16; k++) {
        rows[k] = _mm512_loadu_ps(reinterpret_cast<const float*>(source + k * row));
    }
    // pairs of rows interleaved: in each 128-bit lane L, (a[4L] b[4L]
    // a[4L+1] b[4L+1]) and (a[4L+2] b[4L+2] a[4L+3] b[4L+3])
    __m512 pairs[16];
    for (int k = 0; k < 8; k++) {
        pairs[2 * k] = _mm512_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
        pairs[2 * k + 1] = _mm512_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
    }
    // then 4x4 blocks: lane L of quads[4g + j] holds column 4L + j of rows
    // 4g..4g+3
    __m512 quads[16];
    for (int g = 0; g < 4; g++) {
        const __m512d p0 = _mm512_castps_pd(pairs[4 * g]);
        const __m512d p1 = _mm512_castps_pd(pairs[4 * g + 1]);
        const __m512d p2 = _mm512_castps_pd(pairs[4 * g + 2]);
        const __m512d p3 = _mm512_castps_pd(pairs[4 * g + 3]);
        quads[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(p0, p2));
        quads[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p0, p2));
        quads[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(p1, p3));
        quads[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(p1, p3));
    }
    // lanes gathered across the four row groups: destination row 4L + j is
    // lane L of quads[j], quads[4 + j], quads[8 + j], quads[12 + j]
    for (int j = 0; j < 4; j++) {
        const __m512 even_01 = _mm512_shuffle_f32x4(quads[j], quads[4 + j], 0x88);  // A0 A2 B0 B2
        const __m512 odd_01 = _mm512_shuffle_f32x4(quads[j], quads[4 + j], 0xDD);   // A1 A3 B1 B3
        const __m512 even_23 = _mm512_shuffle_f32x4(quads[8 + j], quads[12 + j], 0x88);
        const __m512 odd_23 = _mm512_shuffle_f32x4(quads[8 + j], quads[12 + j], 0xDD);
        _mm512_storeu_ps(reinterpret_cast<float*>(destination + j * column),
                         _mm512_shuffle_f32x4(even_01, even_23, 0x88));
        _mm512_storeu_ps(reinterpret_cast<float*>(destination + (4 + j) * column),
                         _mm512_shuffle_f32x4(odd_01, odd_23, 0x88));
        _mm512_storeu_ps(reinterpret_cast<float*>(destination + (8 + j) * column),
                         _mm512_shuffle_f32x4(even_01, even_23, 0xDD));
        _mm512_storeu_ps(reinterpret_cast<float*>(destination + (12 + j) * column),
                         _mm512_shuffle_f32x4(odd_01, odd_23, 0xDD));
    }
}

// One step: one 16x16 tile.
struct Tiles4Avx512 {
    __attribute__((target("avx512f"))) void operator()(const unsigned char* tile, int64_t row, unsigned char* out,
                                                       int64_t column) const {
        transpose_16x16_floats(tile, row, out, column);
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx512f"))) void copy_strip(const Transpose& t, const Tiles4Avx512& tiles,
                                                                   unsigned char* destination,
                                                                   const unsigned char* source, uintptr_t begin,
                                                                   uintptr_t end) {
    copy_in_blocks<4, tile_size, tile_size>(t, destination, source, begin, end, tiles);
}

// 8-byte elements whose rows share cache sets (see Tiles4), where the CPU
// has AVX-512: each 8x8 tile is 8 source lines read whole, transposed in
// registers (24 shuffles) and written as 8 whole destination lines, where
// Blocks8Avx2 reads each source line in two halves, one step apart, and
// finds it evicted in between when all its rows fall into one L1 set: 1.5x
// Blocks8Avx2 on the "swap_axes f64 1024x1024" rows of mtsarray-bench. On
// 1000x1000 float64 it is slower, so other shapes keep Blocks8Avx2.
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline void transpose_8x8_doubles(
    const unsigned char* source, int64_t row, unsigned char* destination, int64_t column) {
    __m512d rows[8];
    for (int k = 0; k < 8; k++) {
        rows[k] = _mm512_loadu_pd(reinterpret_cast<const double*>(source + k * row));
    }
    // pairs of rows interleaved: (a0 b0 a2 b2 a4 b4 a6 b6), (a1 b1 a3 b3 ...)
    __m512d pairs[8];
    for (int k = 0; k < 4; k++) {
        pairs[2 * k] = _mm512_unpacklo_pd(rows[2 * k], rows[2 * k + 1]);
        pairs[2 * k + 1] = _mm512_unpackhi_pd(rows[2 * k], rows[2 * k + 1]);
    }
    // 128-bit lanes of two pairs gathered: quads[4h + c] holds columns c and
    // c + 4 of rows 4h..4h+3 (c = 0..3)
    __m512d quads[8];
    for (int h = 0; h < 2; h++) {
        for (int p = 0; p < 2; p++) {
            quads[4 * h + p] = _mm512_shuffle_f64x2(pairs[4 * h + p], pairs[4 * h + 2 + p], 0x88);
            quads[4 * h + 2 + p] = _mm512_shuffle_f64x2(pairs[4 * h + p], pairs[4 * h + 2 + p], 0xDD);
        }
    }
    // columns c and c + 4 of all eight rows
    for (int c = 0; c < 4; c++) {
        _mm512_storeu_pd(reinterpret_cast<double*>(destination + c * column),
                         _mm512_shuffle_f64x2(quads[c], quads[4 + c], 0x88));
        _mm512_storeu_pd(reinterpret_cast<double*>(destination + (c + 4) * column),
                         _mm512_shuffle_f64x2(quads[c], quads[4 + c], 0xDD));
    }
}

// One step: one 8x8 tile.
struct Tiles8Avx512 {
    __attribute__((target("avx512f"))) void operator()(const unsigned char* tile, int64_t row, unsigned char* out,
                                                       int64_t column) const {
        transpose_8x8_doubles(tile, row, out, column);
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx512f"))) void copy_strip(const Transpose& t, const Tiles8Avx512& tiles,
                                                                   unsigned char* destination,
                                                                   const unsigned char* source, uintptr_t begin,
                                                                   uintptr_t end) {
    copy_in_blocks<8, 8, 8>(t, destination, source, begin, end, tiles);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

}  // namespace mtsarray::detail::cpu
