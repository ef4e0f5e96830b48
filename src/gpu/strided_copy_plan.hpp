#pragma once
// strided_copy planning: turns a StridedView into the smallest equivalent
// problem before any kernel runs. Host-only code, shared by CUDA and HIP.
//
// 1. Units. Elements are moved as units of the widest power of two dividing
//    the element size and both base addresses; an element wider than its
//    alignment becomes a trailing axis of units (so a misaligned complex128
//    still copies correctly, 8 or fewer bytes at a time).
// 2. Size-1 axes are dropped and neighbouring axes that are contiguous with
//    each other in the input are merged (the output is always C-contiguous).
// 3. Widening. When the innermost axis is contiguous in the input, pairs of
//    units merge into wider units while every stride and address allows, up
//    to 16 bytes: a strided copy of contiguous rows runs at full width.
// 4. Kind. One contiguous axis left: a plain device copy. Innermost axis
//    strided but another axis contiguous in the input (swap_axes of a
//    contiguous array, the hot case): a tiled transpose of those two axes
//    through shared memory, coalesced on both sides, the other axes being a
//    batch. Otherwise: the general per-unit index decomposition.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/backend.hpp"
#include "base/error.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Axes the common kernels unroll over (they travel by value); views that
/// keep more after merging run kernels sized for max_strided_rank.
constexpr size_t unrolled_strided_rank = 12;
/// Most axes a view may keep after merging: every axis DLPack import
/// accepts (64), plus the axis of units inside an element, with room.
constexpr size_t max_strided_rank = 66;

/// Transpose tiles are this many units on each side.
constexpr uint64_t transpose_tile = 32;

struct StridedCopyPlan {
    enum class Kind { nothing, contiguous, transpose, general };
    Kind kind = Kind::nothing;
    /// Bytes per unit: 1, 2, 4, 8 or 16.
    size_t unit_width = 1;
    /// Axes in C order (outermost first); strides in units, may be <= 0.
    std::vector<uint64_t> shape;
    std::vector<int64_t> input_strides;
    /// Units to copy (the product of `shape`).
    uint64_t total_units = 0;
    /// transpose only: the axis whose input stride is 1 (never the last).
    size_t contiguous_axis = 0;
};

/// Plans the copy of `source` into C-contiguous `destination`. Throws Error
/// when more than max_strided_rank axes remain after merging (which the
/// import of DLPack tensors, limited to 64 axes, never produces).
inline StridedCopyPlan plan_strided_copy(const StridedView& source, const void* destination);

// ---- implementation -------------------------------------------------------

namespace strided_copy_detail {

struct Axis {
    uint64_t size;
    int64_t stride;
};

/// Drops size-1 axes and merges neighbours that are contiguous in the input.
inline std::vector<Axis> merge_axes(const std::vector<Axis>& axes) {
    std::vector<Axis> merged;
    for (const Axis& axis : axes) {
        if (axis.size == 1) {
            continue;
        }
        if (!merged.empty() && merged.back().stride == axis.stride * static_cast<int64_t>(axis.size)) {
            merged.back() = Axis{merged.back().size * axis.size, axis.stride};
        } else {
            merged.push_back(axis);
        }
    }
    if (merged.empty()) {
        merged.push_back(Axis{1, 1});
    }
    return merged;
}

/// Doubles the unit width once if the innermost axis is contiguous and
/// everything stays aligned; returns whether it did.
inline bool widen_units(std::vector<Axis>& axes, size_t& width, uint64_t source_address,
                        uint64_t destination_address) {
    Axis& inner = axes.back();
    const size_t wider = 2 * width;
    if (wider > max_unit_width || inner.stride != 1 || inner.size % 2 != 0 ||
        source_address % wider != 0 || destination_address % wider != 0) {
        return false;
    }
    for (size_t i = 0; i + 1 < axes.size(); i++) {
        if (axes[i].stride % 2 != 0) {
            return false;
        }
    }
    for (size_t i = 0; i + 1 < axes.size(); i++) {
        axes[i].stride /= 2;
    }
    inner.size /= 2;
    width = wider;
    return true;
}

}  // namespace strided_copy_detail

inline StridedCopyPlan plan_strided_copy(const StridedView& source, const void* destination) {
    using strided_copy_detail::Axis;
    MTSARRAY_EXPECTS(source.shape.size() == source.strides.size(),
                     "strided_copy: shape and strides have different lengths");
    MTSARRAY_EXPECTS(source.element_size != 0 && source.element_size <= max_unit_width,
                     "strided_copy: unsupported element size " + std::to_string(source.element_size));

    StridedCopyPlan plan;
    for (uintptr_t size : source.shape) {
        if (size == 0) {
            return plan;  // Kind::nothing
        }
    }

    const uint64_t source_address = reinterpret_cast<uintptr_t>(source.data);
    const uint64_t destination_address = reinterpret_cast<uintptr_t>(destination);
    size_t width = alignment_of(source.element_size);
    width = std::min(width, alignment_of(source_address));
    width = std::min(width, alignment_of(destination_address));
    const uint64_t units_per_element = source.element_size / width;

    std::vector<Axis> axes;
    axes.reserve(source.shape.size() + 1);
    for (size_t i = 0; i < source.shape.size(); i++) {
        // an axis of one element is dropped when merging: its stride, which
        // DLPack lets be anything, is never multiplied
        const int64_t stride = source.shape[i] == 1 ? 0 : source.strides[i] * static_cast<int64_t>(units_per_element);
        axes.push_back(Axis{source.shape[i], stride});
    }
    axes.push_back(Axis{units_per_element, 1});

    axes = strided_copy_detail::merge_axes(axes);
    while (strided_copy_detail::widen_units(axes, width, source_address, destination_address)) {
        axes = strided_copy_detail::merge_axes(axes);
    }

    MTSARRAY_EXPECTS(axes.size() <= max_strided_rank,
                     "strided_copy: the view keeps " + std::to_string(axes.size()) +
                         " axes after merging contiguous ones, at most " +
                         std::to_string(max_strided_rank) + " are supported");

    plan.unit_width = width;
    plan.total_units = 1;
    for (const Axis& axis : axes) {
        plan.shape.push_back(axis.size);
        plan.input_strides.push_back(axis.stride);
        plan.total_units *= axis.size;
    }

    const Axis& inner = axes.back();
    if (axes.size() == 1 && inner.stride == 1) {
        plan.kind = StridedCopyPlan::Kind::contiguous;
        return plan;
    }
    plan.kind = StridedCopyPlan::Kind::general;
    // A transpose pays off only when both tile sides are reasonably filled;
    // thin cases read well enough through the cache in the general kernel.
    constexpr uint64_t min_transpose_side = 8;
    if (inner.stride != 1 && inner.size >= min_transpose_side) {
        for (size_t i = axes.size() - 1; i-- > 0;) {
            if (axes[i].stride == 1 && axes[i].size >= min_transpose_side) {
                plan.kind = StridedCopyPlan::Kind::transpose;
                plan.contiguous_axis = i;
                break;
            }
        }
    }
    return plan;
}

}  // namespace gpu
}  // namespace mtsarray::detail
