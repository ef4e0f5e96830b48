#include "cpu/strided_copy.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "error.hpp"

namespace mtsarray::detail::cpu {

namespace {

struct Axis {
    uintptr_t size;
    int64_t source_stride;       // elements
    int64_t destination_stride;  // elements
};

// Drops size-1 axes and merges neighbours that are contiguous in both arrays.
std::vector<Axis> simplify(const StridedView& source) {
    std::vector<Axis> axes;
    int64_t destination_stride = 1;
    std::vector<Axis> reversed;
    for (size_t i = source.shape.size(); i-- > 0;) {
        reversed.push_back({source.shape[i], source.strides[i], destination_stride});
        destination_stride *= static_cast<int64_t>(source.shape[i]);
    }
    for (size_t i = reversed.size(); i-- > 0;) {
        const auto& axis = reversed[i];
        if (axis.size == 1) {
            continue;
        }
        if (!axes.empty()) {
            auto& previous = axes.back();
            if (previous.source_stride == axis.source_stride * static_cast<int64_t>(axis.size) &&
                previous.destination_stride == axis.destination_stride * static_cast<int64_t>(axis.size)) {
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

struct Element1 { unsigned char bytes[1]; };
struct Element2 { unsigned char bytes[2]; };
struct Element4 { unsigned char bytes[4]; };
struct Element8 { unsigned char bytes[8]; };
struct Element16 { unsigned char bytes[16]; };

constexpr uintptr_t tile = 32;

// Copies the 2-D block spanned by axes `inner` (destination-contiguous) and
// `other` tile by tile, so that both the reads and the writes stay in cache.
template <typename Element>
void transpose_block(unsigned char* destination, const unsigned char* source, const Axis& inner,
                     const Axis& other) {
    constexpr auto size = static_cast<int64_t>(sizeof(Element));
    for (uintptr_t o0 = 0; o0 < other.size; o0 += tile) {
        const uintptr_t o1 = o0 + tile < other.size ? o0 + tile : other.size;
        for (uintptr_t i0 = 0; i0 < inner.size; i0 += tile) {
            const uintptr_t i1 = i0 + tile < inner.size ? i0 + tile : inner.size;
            for (uintptr_t o = o0; o < o1; o++) {
                const auto* input = source + static_cast<int64_t>(o) * other.source_stride * size;
                auto* output = destination + static_cast<int64_t>(o) * other.destination_stride * size;
                for (uintptr_t i = i0; i < i1; i++) {
                    std::memcpy(output + static_cast<int64_t>(i) * size,
                                input + static_cast<int64_t>(i) * inner.source_stride * size, sizeof(Element));
                }
            }
        }
    }
}

template <typename Element>
void copy_axes(unsigned char* destination, const unsigned char* source, const std::vector<Axis>& axes) {
    constexpr auto size = static_cast<int64_t>(sizeof(Element));
    const Axis& inner = axes.back();
    // the block's second axis: the one the source walks most densely
    size_t other_index = axes.size();
    if (inner.source_stride != 1) {
        for (size_t i = 0; i + 1 < axes.size(); i++) {
            if (other_index == axes.size() ||
                std::llabs(axes[i].source_stride) < std::llabs(axes[other_index].source_stride)) {
                other_index = i;
            }
        }
    }

    std::vector<uintptr_t> outer;  // indices of the axes iterated one by one
    for (size_t i = 0; i + 1 < axes.size(); i++) {
        if (i != other_index) {
            outer.push_back(i);
        }
    }
    std::vector<uintptr_t> position(outer.size(), 0);
    while (true) {
        int64_t source_offset = 0;
        int64_t destination_offset = 0;
        for (size_t k = 0; k < outer.size(); k++) {
            source_offset += static_cast<int64_t>(position[k]) * axes[outer[k]].source_stride;
            destination_offset += static_cast<int64_t>(position[k]) * axes[outer[k]].destination_stride;
        }
        auto* output = destination + destination_offset * size;
        const auto* input = source + source_offset * size;
        if (other_index != axes.size()) {
            transpose_block<Element>(output, input, inner, axes[other_index]);
        } else if (inner.source_stride == 1) {
            std::memcpy(output, input, inner.size * sizeof(Element));
        } else {
            for (uintptr_t i = 0; i < inner.size; i++) {
                std::memcpy(output + static_cast<int64_t>(i) * size,
                            input + static_cast<int64_t>(i) * inner.source_stride * size, sizeof(Element));
            }
        }
        // odometer over the outer axes, last one fastest
        size_t k = outer.size();
        while (k > 0) {
            k--;
            if (++position[k] < axes[outer[k]].size) {
                break;
            }
            position[k] = 0;
        }
        if (k == 0 && (outer.empty() || position[0] == 0)) {
            return;
        }
    }
}

}  // namespace

void strided_copy(void* destination, const StridedView& source) {
    for (auto size : source.shape) {
        if (size == 0) {
            return;
        }
    }
    auto axes = simplify(source);
    auto* output = static_cast<unsigned char*>(destination);
    const auto* input = static_cast<const unsigned char*>(source.data);
    if (axes.empty()) {  // a single element
        std::memcpy(output, input, source.element_size);
        return;
    }
    if (axes.size() == 1 && axes[0].source_stride == 1) {
        std::memcpy(output, input, axes[0].size * source.element_size);
        return;
    }
    switch (source.element_size) {
    case 1: return copy_axes<Element1>(output, input, axes);
    case 2: return copy_axes<Element2>(output, input, axes);
    case 4: return copy_axes<Element4>(output, input, axes);
    case 8: return copy_axes<Element8>(output, input, axes);
    case 16: return copy_axes<Element16>(output, input, axes);
    default: throw Error("strided copy: unsupported element size " + std::to_string(source.element_size));
    }
}

}  // namespace mtsarray::detail::cpu
