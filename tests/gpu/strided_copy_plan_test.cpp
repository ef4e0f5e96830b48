// The GPU strided copy's host-side planning (src/gpu/strided_copy_plan.hpp):
// views with many axes that do not merge are planned, not refused, up to
// every axis DLPack import accepts, as on the CPU. The kernels themselves
// run in the contract suite (on the simulated runtime when there is no GPU).

#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/error.hpp"
#include "gpu/strided_copy_plan.hpp"

using namespace mtsarray::detail;
using namespace mtsarray::detail::gpu;

namespace {

/// `rank` axes of size 2 whose strides are a reversed C layout: no two
/// neighbours merge.
StridedView reversed_view(size_t rank, size_t element_size) {
    StridedView view;
    view.data = reinterpret_cast<const void*>(uintptr_t(4096));
    view.element_size = element_size;
    view.shape = Shape(std::vector<uintptr_t>(rank, 2));
    int64_t stride = 1;
    for (size_t axis = 0; axis < rank; axis++) {
        view.strides.push_back(stride);
        stride *= 2;
    }
    return view;
}

}  // namespace

TEST(GpuStridedPlan, ViewsWithManyAxesArePlanned) {
    void* destination = reinterpret_cast<void*>(uintptr_t(8192));
    for (size_t rank : {2u, 12u, 13u, 20u, 30u}) {
        SCOPED_TRACE(::testing::Message() << rank << " axes");
        const auto plan = plan_strided_copy(reversed_view(rank, 8), destination);
        EXPECT_EQ(plan.shape.size(), rank);
        EXPECT_EQ(plan.total_units, uint64_t(1) << rank);
        EXPECT_NE(plan.kind, StridedCopyPlan::Kind::contiguous);
    }
    // an element wider than its alignment adds one axis of units
    const auto plan = plan_strided_copy(reversed_view(30, 16), reinterpret_cast<void*>(uintptr_t(8200)));
    EXPECT_EQ(plan.shape.size(), 31u);
    EXPECT_EQ(plan.unit_width, 8u);
    EXPECT_LE(plan.shape.size(), max_strided_rank);
}

TEST(GpuStridedPlan, SizeOneAxesAndContiguousNeighboursMerge) {
    StridedView view;
    view.data = reinterpret_cast<const void*>(uintptr_t(4096));
    view.element_size = 4;
    // 64 axes: all but two of size 1, the last two contiguous
    view.shape = Shape(std::vector<uintptr_t>(64, 1));
    view.strides.assign(64, 7);
    view.shape[62] = 5;
    view.strides[62] = 3;
    view.shape[63] = 3;
    view.strides[63] = 1;
    const auto plan = plan_strided_copy(view, reinterpret_cast<void*>(uintptr_t(8192)));
    EXPECT_EQ(plan.kind, StridedCopyPlan::Kind::contiguous);
    EXPECT_EQ(plan.total_units * plan.unit_width, 60u);
}
