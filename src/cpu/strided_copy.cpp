#include "cpu/strided_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MTSARRAY_X86_TRANSPOSES 1
#endif

#include "cpu/copy.hpp"
#include "cpu/cpu_features.hpp"
#include "cpu/parallel_split.hpp"
#include "error.hpp"

namespace mtsarray::detail::cpu {

namespace {

struct Axis {
    uintptr_t size;
    int64_t source_stride;       // bytes
    int64_t destination_stride;  // bytes
};

// Destination order (outermost first), without size-1 axes, neighbours that
// are contiguous in both arrays merged.
std::vector<Axis> simplify(const StridedView& source) {
    const auto element = static_cast<int64_t>(source.element_size);
    std::vector<Axis> reversed;
    int64_t destination_stride = element;
    for (size_t i = source.shape.size(); i-- > 0;) {
        // an axis of one element is dropped below: its stride, which DLPack
        // lets be anything, is never multiplied
        const int64_t source_stride = source.shape[i] == 1 ? 0 : source.strides[i] * element;
        reversed.push_back({source.shape[i], source_stride, destination_stride});
        destination_stride *= static_cast<int64_t>(source.shape[i]);
    }
    std::vector<Axis> axes;
    for (size_t i = reversed.size(); i-- > 0;) {
        const auto& axis = reversed[i];
        if (axis.size == 1) {
            continue;
        }
        if (!axes.empty()) {
            auto& previous = axes.back();
            const auto size = static_cast<int64_t>(axis.size);
            if (previous.source_stride == axis.source_stride * size &&
                previous.destination_stride == axis.destination_stride * size) {
                previous.size *= axis.size;
                previous.source_stride = axis.source_stride;
                previous.destination_stride = axis.destination_stride;
                continue;
            }
        }
        axes.push_back(axis);
    }
    return axes;
}

// A cache line of the destination is written at once: 64 / element
// consecutive elements of the innermost axis per step.
constexpr size_t line_bytes = 64;
// Bytes of each source row that one strip reads: the rows of a strip stay
// in L1 while the step walks them, and a strip is the unit of parallel work.
constexpr size_t strip_bytes = 512;
// The 8-row kernels below take wider strips (fewer, longer runs down the
// source's rows per strip).
constexpr size_t wide_strip_bytes = 1024;

// Copies one element of a fixed size: the compiler emits plain loads and
// stores, and the loops over them unroll.
template <size_t Size>
struct FixedElement {
    static constexpr size_t step = Size >= line_bytes ? 1 : line_bytes / Size;
    size_t size() const { return Size; }
    void copy(unsigned char* destination, const unsigned char* source) const {
        std::memcpy(destination, source, Size);
    }
};

// Any other size: the runs of a contiguous innermost axis (3 doubles, 16
// floats, ...), copied whole.
struct RunElement {
    static constexpr size_t step = 1;
    size_t bytes;
    size_t size() const { return bytes; }
    void copy(unsigned char* destination, const unsigned char* source) const {
        std::memcpy(destination, source, bytes);
    }
};

// The copy, as a 2-D blocked transpose between `inner` (the innermost
// destination axis: destination stride = one element) and `other` (the
// axis the source walks most densely), repeated at every position of the
// `outer` axes. Work units: (outer position, strip of `other`).
struct Transpose {
    unsigned char* destination;
    const unsigned char* source;
    Axis inner;
    Axis other;
    std::vector<Axis> outer;
    uintptr_t strip;  // elements of `other` per strip
    size_t strips;    // per outer position
    size_t units;
};

template <typename Element>
void copy_strip(const Transpose& t, const Element& element, unsigned char* destination, const unsigned char* source,
                uintptr_t begin, uintptr_t end) {
    constexpr size_t step = Element::step;
    const size_t size = element.size();
    const Axis& inner = t.inner;
    const Axis& other = t.other;
    uintptr_t i = 0;
    for (; i + step <= inner.size; i += step) {
        const unsigned char* rows = source + static_cast<int64_t>(i) * inner.source_stride;
        unsigned char* line = destination + i * size;
        for (uintptr_t o = begin; o < end; o++) {
            const unsigned char* from = rows + static_cast<int64_t>(o) * other.source_stride;
            unsigned char* to = line + static_cast<int64_t>(o) * other.destination_stride;
            for (size_t k = 0; k < step; k++) {
                element.copy(to + k * size, from + static_cast<int64_t>(k) * inner.source_stride);
            }
        }
    }
    if (i < inner.size) {
        const size_t rest = inner.size - i;
        const unsigned char* rows = source + static_cast<int64_t>(i) * inner.source_stride;
        unsigned char* line = destination + i * size;
        for (uintptr_t o = begin; o < end; o++) {
            const unsigned char* from = rows + static_cast<int64_t>(o) * other.source_stride;
            unsigned char* to = line + static_cast<int64_t>(o) * other.destination_stride;
            for (size_t k = 0; k < rest; k++) {
                element.copy(to + k * size, from + static_cast<int64_t>(k) * inner.source_stride);
            }
        }
    }
}

#if defined(__SSE2__)
// Register-blocked kernels, for 8- and 4-byte elements when the source
// walks the blocked axis contiguously (the common swap of two axes): 2x2
// (4x4) blocks are read as 2 (4) vector loads along the source's rows,
// transposed in registers and stored as 2 (4) vector stores. The source is
// then read in order, row after row of the strip (the hardware prefetcher
// follows), instead of element by element down a column: 2.5x the
// bandwidth of copy_strip on a 1000x1000 float64 transpose.
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
// destination row gets 32 bytes per step: 1.4x the 4-row kernel on a
// 1000x1000 float32 transpose (power-of-two shapes take Tiles4 below, and
// CPUs with AVX2 Blocks4Avx2).
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

#if defined(MTSARRAY_X86_TRANSPOSES)
// 8-byte elements where the CPU has AVX2 (the library itself is built for
// baseline x86-64, so this is chosen at run time): 4x4 blocks, two above
// each other per step, so that every destination row written gets 64
// bytes, a whole cache line, per step, and every source row is read 32
// bytes at a time. Strips are 128 elements wide (1 KiB of each source
// row). On a 1000x1000 float64 transpose this is 1.3-1.6x the 2x2 SSE2
// kernel (measured side by side, bench/README.md).
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
// of Blocks4's two 4x4 SSE2 blocks. One thread, alternated runs of a driver
// calling swap_axes: 1000x1000 float32 1.30x Blocks4, 3000x2000 1.32x,
// 250x4000 1.05x, small and (n, 3, 16) shapes the same; two threads
// 1.10-1.18x (bench/README.md, "Transpose kernels").
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

// 4-byte elements whose rows share cache sets (see Tiles4), where the CPU
// has AVX-512: each 16x16 tile is 16 source lines read whole, one 64-byte
// load each, transposed in registers and written as 16 whole destination
// lines. No line is read or written twice and no buffer is needed: 1.4-1.8x
// Tiles4 on the 1024x1024 float32 swap_axes row of the benchmark, 2x on
// 512x512 (bench/README.md, "Power-of-two transposes"). Not used for other
// shapes: on 1000x1000 float32 it is slower than Blocks4.

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
// Blocks8Avx2 on the 1024x1024 float64 swap_axes row of the benchmark
// (bench/README.md, "Power-of-two transposes"). On 1000x1000 float64 it is
// slower, so other shapes keep Blocks8Avx2.
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

// Units [begin, end): the outer position of `begin` is found once, then
// advanced like an odometer (last axis fastest).
template <typename Element>
void copy_units(const Transpose& t, const Element& element, size_t begin, size_t end) {
    const size_t dimensions = t.outer.size();
    std::vector<uintptr_t> position(dimensions, 0);
    size_t rest = begin / t.strips;
    int64_t source_offset = 0;
    int64_t destination_offset = 0;
    for (size_t k = dimensions; k-- > 0;) {
        position[k] = rest % t.outer[k].size;
        rest /= t.outer[k].size;
        source_offset += static_cast<int64_t>(position[k]) * t.outer[k].source_stride;
        destination_offset += static_cast<int64_t>(position[k]) * t.outer[k].destination_stride;
    }
    size_t strip = begin % t.strips;
    for (size_t unit = begin; unit < end; unit++) {
        const uintptr_t first = strip * t.strip;
        const uintptr_t last = std::min<uintptr_t>(first + t.strip, t.other.size);
        copy_strip(t, element, t.destination + destination_offset, t.source + source_offset, first, last);
        if (++strip == t.strips) {
            strip = 0;
            for (size_t k = dimensions; k-- > 0;) {
                source_offset += t.outer[k].source_stride;
                destination_offset += t.outer[k].destination_stride;
                if (++position[k] < t.outer[k].size) {
                    break;
                }
                source_offset -= static_cast<int64_t>(position[k]) * t.outer[k].source_stride;
                destination_offset -= static_cast<int64_t>(position[k]) * t.outer[k].destination_stride;
                position[k] = 0;
            }
        }
    }
}

// Strips of `strip_bytes` of each source row: the units the threads share.
void cut_strips(Transpose& t, size_t element, size_t strip_bytes) {
    t.strip = std::max<size_t>(1, strip_bytes / element);
    t.strips = (t.other.size + t.strip - 1) / t.strip;
    t.units = t.strips;
    for (const auto& axis : t.outer) {
        t.units *= axis.size;
    }
}

template <typename Element>
void run_transpose(const Transpose& t, const Element& element, size_t threads) {
    for_each_piece(t.units, 1, threads, [&](size_t begin, size_t end) { copy_units(t, element, begin, end); });
}

}  // namespace

void strided_copy(void* destination, const StridedView& source, size_t threads, InstructionSet instructions) {
    for (auto size : source.shape) {
        if (size == 0) {
            return;
        }
    }
    const size_t element_size = source.element_size;
    MTSARRAY_EXPECTS(element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8 ||
                         element_size == 16,
                     "strided copy: unsupported element size " + std::to_string(element_size));
    auto axes = simplify(source);
    auto* output = static_cast<unsigned char*>(destination);
    const auto* input = static_cast<const unsigned char*>(source.data);

    // A source-contiguous innermost axis is one run per position of the
    // other axes: it becomes the element.
    size_t element = element_size;
    if (!axes.empty() && axes.back().source_stride == static_cast<int64_t>(element_size)) {
        element *= axes.back().size;
        axes.pop_back();
    }
    if (axes.empty()) {  // contiguous after all
        copy(output, input, element, threads);
        return;
    }

    Transpose t;
    t.destination = output;
    t.source = input;
    t.inner = axes.back();
    axes.pop_back();
    size_t densest = axes.size();
    for (size_t i = 0; i < axes.size(); i++) {
        if (densest == axes.size() || std::llabs(axes[i].source_stride) < std::llabs(axes[densest].source_stride)) {
            densest = i;
        }
    }
    if (densest == axes.size()) {
        t.other = {1, 0, 0};
    } else {
        t.other = axes[densest];
        axes.erase(axes.begin() + static_cast<std::ptrdiff_t>(densest));
    }
    t.outer = std::move(axes);
    const bool blocked_8 = element == 8 && t.other.source_stride == 8;
    const bool blocked_4 = element == 4 && t.other.source_stride == 4;
#if defined(MTSARRAY_X86_TRANSPOSES)
    if (blocked_8 && instructions == InstructionSet::best && cpu_has_avx2()) {
        cut_strips(t, element, wide_strip_bytes);
        if (rows_share_cache_sets(t) && cpu_has_avx512f()) {
            return run_transpose(t, Tiles8Avx512{}, threads);
        }
        return run_transpose(t, Blocks8Avx2{}, threads);
    }
#else
    (void)instructions;
#endif
#if defined(__SSE2__)
    if (blocked_8) {
        cut_strips(t, element, strip_bytes);
        return run_transpose(t, Blocks8{}, threads);
    }
    if (blocked_4) {
        cut_strips(t, element, wide_strip_bytes);
        if (rows_share_cache_sets(t)) {
#if defined(MTSARRAY_X86_TRANSPOSES)
            if (instructions == InstructionSet::best && cpu_has_avx512f()) {
                return run_transpose(t, Tiles4Avx512{}, threads);
            }
#endif
            return run_transpose(t, Tiles4{}, threads);
        }
#if defined(MTSARRAY_X86_TRANSPOSES)
        if (instructions == InstructionSet::best && cpu_has_avx2()) {
            return run_transpose(t, Blocks4Avx2{}, threads);
        }
#endif
        return run_transpose(t, Blocks4{}, threads);
    }
#endif
    cut_strips(t, element, strip_bytes);
    switch (element) {
    case 1: return run_transpose(t, FixedElement<1>{}, threads);
    case 2: return run_transpose(t, FixedElement<2>{}, threads);
    case 4: return run_transpose(t, FixedElement<4>{}, threads);
    case 8: return run_transpose(t, FixedElement<8>{}, threads);
    case 16: return run_transpose(t, FixedElement<16>{}, threads);
    case 24: return run_transpose(t, FixedElement<24>{}, threads);
    case 32: return run_transpose(t, FixedElement<32>{}, threads);
    default: return run_transpose(t, RunElement{element}, threads);
    }
}

}  // namespace mtsarray::detail::cpu
