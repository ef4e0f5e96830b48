#include "cpu/strided_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "cpu/copy.hpp"
#include "cpu/cpu_features.hpp"
#include "cpu/strided_copy_avx2.hpp"
#include "cpu/strided_copy_avx512.hpp"
#include "cpu/strided_copy_sse2.hpp"
#include "cpu/strided_copy_transpose.hpp"
#include "cpu/threads/parallel_split.hpp"

namespace mtsarray::detail::cpu {

namespace {

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
        if (rows_share_cache_sets(t) && cpu_has_avx512f()) {
            cut_strips(t, element, tile_strip_bytes);
            return run_transpose(t, Tiles8Avx512{}, threads);
        }
        cut_strips(t, element, wide_strip_bytes);
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
        if (rows_share_cache_sets(t)) {
            cut_strips(t, element, tile_strip_bytes);
#if defined(MTSARRAY_X86_TRANSPOSES)
            if (instructions == InstructionSet::best && cpu_has_avx512f()) {
                return run_transpose(t, Tiles4Avx512{}, threads);
            }
#endif
            return run_transpose(t, Tiles4{}, threads);
        }
        cut_strips(t, element, wide_strip_bytes);
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
