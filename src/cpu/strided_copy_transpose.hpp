#pragma once
// The shapes of the CPU's strided copy (cpu/strided_copy.cpp): a copy seen
// as a 2-D blocked transpose, its work units and element copies, shared by
// the plain kernel and the tuned ones (strided_copy_sse2.hpp,
// strided_copy_avx2.hpp, strided_copy_avx512.hpp). Internal to
// strided_copy.cpp, the one file that includes these headers.

#include <cstddef>
#include <cstdint>
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

namespace mtsarray::detail::cpu {

namespace {

struct Axis {
    uintptr_t size;
    int64_t source_stride;       // bytes
    int64_t destination_stride;  // bytes
};

// A cache line of the destination is written at once: 64 / element
// consecutive elements of the innermost axis per step.
constexpr size_t line_bytes = 64;
// Bytes of each source row that one strip reads: the rows of a strip stay
// in L1 while the step walks them, and a strip is the unit of parallel work.
constexpr size_t strip_bytes = 512;
// The 8-row kernels below take wider strips (fewer, longer runs down the
// source's rows per strip).
constexpr size_t wide_strip_bytes = 1024;
// The tile kernels (Tiles4, Tiles4Avx512, Tiles8Avx512: rows that share
// cache sets) read each source line and write each destination line whole,
// once, so a wider strip keeps nothing in the cache for later: their strips
// are one tile wide. Each step then writes the next line of the same few
// destination rows (a handful of write streams), where a 1 KiB strip wrote
// one line into each of 128-256 rows 2 KiB apart or more, all in a few
// cache sets. "swap_axes f64 / f32 1024x1024 [1 thread]" on the AMD EPYC VM:
// 2.2-3.1x faster (six runs).
constexpr size_t tile_strip_bytes = line_bytes;

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

}  // namespace

}  // namespace mtsarray::detail::cpu
