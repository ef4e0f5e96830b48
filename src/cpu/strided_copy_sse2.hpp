#pragma once
// Register-blocked transposes in SSE2 (the baseline of x86-64), for 8- and
// 4-byte elements. Internal to strided_copy.cpp.

#include <cstdint>

#include "cpu/strided_copy_transpose.hpp"

namespace mtsarray::detail::cpu {

namespace {

#if defined(__SSE2__)
// Register-blocked kernels, for 8- and 4-byte elements when the source
// walks the blocked axis contiguously (the common swap of two axes): 2x2
// (4x4) blocks are read as 2 (4) vector loads along the source's rows,
// transposed in registers and stored as 2 (4) vector stores. The source is
// then read in order, row after row of the strip (the hardware prefetcher
// follows), instead of element by element down a column: 2.5x the
// bandwidth of copy_strip on the "swap_axes f64 1000x1000" rows.
struct Blocks8 {};
struct Blocks4 {};

// Rows of the source this far ahead are prefetched (their part of the strip).
constexpr uintptr_t prefetch_rows = 8;

inline void prefetch_strip(const unsigned char* row, uintptr_t bytes) {
    for (uintptr_t offset = 0; offset < bytes; offset += line_bytes) {
        __builtin_prefetch(row + offset);
    }
}

void copy_strip(const Transpose& t, const Blocks8&, unsigned char* destination, const unsigned char* source,
                uintptr_t begin, uintptr_t end) {
    const int64_t row = t.inner.source_stride;       // between the source rows read
    const int64_t column = t.other.destination_stride;  // between the destination rows written
    const unsigned char* from = source + begin * 8;
    unsigned char* to = destination + static_cast<int64_t>(begin) * column;
    const uintptr_t width = end - begin;
    uintptr_t i = 0;
    for (; i + 2 <= t.inner.size; i += 2) {
        const unsigned char* r0 = from + static_cast<int64_t>(i) * row;
        const unsigned char* r1 = r0 + row;
        if (i + prefetch_rows + 1 < t.inner.size) {
            prefetch_strip(r0 + static_cast<int64_t>(prefetch_rows) * row, width * 8);
            prefetch_strip(r1 + static_cast<int64_t>(prefetch_rows) * row, width * 8);
        }
        unsigned char* out = to + i * 8;
        uintptr_t o = 0;
        for (; o + 2 <= width; o += 2) {
            const __m128d a = _mm_loadu_pd(reinterpret_cast<const double*>(r0 + o * 8));
            const __m128d b = _mm_loadu_pd(reinterpret_cast<const double*>(r1 + o * 8));
            _mm_storeu_pd(reinterpret_cast<double*>(out + static_cast<int64_t>(o) * column), _mm_unpacklo_pd(a, b));
            _mm_storeu_pd(reinterpret_cast<double*>(out + static_cast<int64_t>(o + 1) * column), _mm_unpackhi_pd(a, b));
        }
        if (o < width) {
            std::memcpy(out + static_cast<int64_t>(o) * column, r0 + o * 8, 8);
            std::memcpy(out + static_cast<int64_t>(o) * column + 8, r1 + o * 8, 8);
        }
    }
    for (; i < t.inner.size; i++) {
        const unsigned char* r = from + static_cast<int64_t>(i) * row;
        for (uintptr_t o = 0; o < width; o++) {
            std::memcpy(to + static_cast<int64_t>(o) * column + i * 8, r + o * 8, 8);
        }
    }
}

// What the block kernels below leave to plain copies: the columns after the
// last whole block of `block_width` columns, and the rows after the last
// whole `block_height` rows.
template <size_t Bytes>
void copy_outside_blocks(const Transpose& t, unsigned char* to, const unsigned char* from, uintptr_t width,
                         uintptr_t block_height, uintptr_t block_width) {
    const int64_t row = t.inner.source_stride;
    const int64_t column = t.other.destination_stride;
    const uintptr_t block_rows = t.inner.size / block_height * block_height;
    const uintptr_t block_columns = width / block_width * block_width;
    auto copy_element = [&](uintptr_t i, uintptr_t o) {
        std::memcpy(to + static_cast<int64_t>(o) * column + i * Bytes, from + static_cast<int64_t>(i) * row + o * Bytes,
                    Bytes);
    };
    for (uintptr_t i = 0; i < block_rows; i++) {
        for (uintptr_t o = block_columns; o < width; o++) {
            copy_element(i, o);
        }
    }
    for (uintptr_t i = block_rows; i < t.inner.size; i++) {
        for (uintptr_t o = 0; o < width; o++) {
            copy_element(i, o);
        }
    }
}

// The walk that the block kernels below share: blocks of `Height` source
// rows by `Width` columns of the strip, each given to `block(source, row,
// destination, column)` (where the block starts in each array, and the
// strides between its source rows and between its destination rows), then
// plain copies for what the blocks leave. A kernel built for another
// instruction set passes an object whose call operator has that target
// and no always_inline (GCC and Clang refuse to force target code into
// this template, which has none); its copy_strip, which has the target,
// is `flatten`, so that the walk and the call operator are both inlined
// there.
template <size_t Bytes, uintptr_t Height, uintptr_t Width, typename Block>
[[gnu::always_inline]] inline void copy_in_blocks(const Transpose& t, unsigned char* destination,
                                                  const unsigned char* source, uintptr_t begin, uintptr_t end,
                                                  const Block& block) {
    const int64_t row = t.inner.source_stride;
    const int64_t column = t.other.destination_stride;
    const unsigned char* from = source + begin * Bytes;
    unsigned char* to = destination + static_cast<int64_t>(begin) * column;
    const uintptr_t width = end - begin;
    for (uintptr_t i = 0; i + Height <= t.inner.size; i += Height) {
        const unsigned char* r = from + static_cast<int64_t>(i) * row;
        unsigned char* out = to + i * Bytes;
        for (uintptr_t o = 0; o + Width <= width; o += Width) {
            block(r + o * Bytes, row, out + static_cast<int64_t>(o) * column, column);
        }
    }
    copy_outside_blocks<Bytes>(t, to, from, width, Height, Width);
}

// 4x4 floats: 4 rows read 16 bytes each, written as 4 columns.
inline void transpose_4x4_floats(const unsigned char* source, int64_t row, unsigned char* destination,
                                 int64_t column) {
    __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(source));
    __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(source + row));
    __m128 c = _mm_loadu_ps(reinterpret_cast<const float*>(source + 2 * row));
    __m128 d = _mm_loadu_ps(reinterpret_cast<const float*>(source + 3 * row));
    _MM_TRANSPOSE4_PS(a, b, c, d);
    _mm_storeu_ps(reinterpret_cast<float*>(destination), a);
    _mm_storeu_ps(reinterpret_cast<float*>(destination + column), b);
    _mm_storeu_ps(reinterpret_cast<float*>(destination + 2 * column), c);
    _mm_storeu_ps(reinterpret_cast<float*>(destination + 3 * column), d);
}

// 8 source rows per step (two 4x4 blocks above each other), so that each
// destination row gets 32 bytes per step: 1.4x the 4-row kernel on the
// "swap_axes f32 1000x1000" rows (power-of-two shapes take Tiles4 below,
// and CPUs with AVX2 Blocks4Avx2).
void copy_strip(const Transpose& t, const Blocks4&, unsigned char* destination, const unsigned char* source,
                uintptr_t begin, uintptr_t end) {
    copy_in_blocks<4, 8, 4>(t, destination, source, begin, end,
                            [](const unsigned char* block, int64_t row, unsigned char* out, int64_t column) {
                                transpose_4x4_floats(block, row, out, column);
                                transpose_4x4_floats(block + 4 * row, row, out + 16, column);
                            });
}

// 4-byte elements whose rows, in either array, are a multiple of 2 KiB
// apart (power-of-two shapes): the rows then share a few L1 sets, and the
// kernel above, which reads each source line 16 bytes at a time over
// several steps, finds it evicted in between (11% of memcpy on a 1024x1024
// float32 transpose). Here each 16x16 tile is first copied whole-line by
// whole-line into a small buffer whose rows are padded apart, then
// transposed out of it, writing whole destination lines: no line has to
// stay in the cache from one tile to the next.
struct Tiles4 {};
constexpr uintptr_t tile_size = 16;

// Whether the rows of the source or of the destination are a multiple of
// 2 KiB apart: the kernels that read or write whole lines take over there.
bool rows_share_cache_sets(const Transpose& t) {
    auto shares = [](int64_t stride_bytes) { return stride_bytes != 0 && std::llabs(stride_bytes) % 2048 == 0; };
    return shares(t.inner.source_stride) || shares(t.other.destination_stride);
}

void copy_strip(const Transpose& t, const Tiles4&, unsigned char* destination, const unsigned char* source,
                uintptr_t begin, uintptr_t end) {
    constexpr int64_t buffer_row = (tile_size + 4) * 4;  // bytes: padded, the rows land in different sets
    alignas(64) unsigned char buffer[tile_size * buffer_row];
    copy_in_blocks<4, tile_size, tile_size>(
        t, destination, source, begin, end,
        [&buffer](const unsigned char* tile, int64_t row, unsigned char* out, int64_t column) {
            for (uintptr_t k = 0; k < tile_size; k++) {
                std::memcpy(buffer + k * buffer_row, tile + static_cast<int64_t>(k) * row, tile_size * 4);
            }
            for (uintptr_t c = 0; c < tile_size; c += 4) {
                for (uintptr_t r = 0; r < tile_size; r += 4) {
                    transpose_4x4_floats(buffer + r * buffer_row + c * 4, buffer_row,
                                         out + static_cast<int64_t>(c) * column + r * 4, column);
                }
            }
        });
}
#endif

}  // namespace

}  // namespace mtsarray::detail::cpu
