#pragma once
// MovePlans over movement lists that live as long as the test program: a
// plan borrows its movements (it lives inside one move_data call), so the
// unit tests of MovePlan and of the CPU's scan keep theirs here.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <metatensor.h>

#include "base/move_plan.hpp"

namespace mtsarray_test {

inline mtsarray::detail::MovePlan kept_plan(const std::vector<uintptr_t>& output_shape,
                                            const std::vector<uintptr_t>& input_shape, size_t element_size,
                                            const std::vector<mts_data_movement_t>& movements) {
    static std::deque<std::vector<mts_data_movement_t>> kept;
    const auto& stored = kept.emplace_back(movements);
    return mtsarray::detail::MovePlan(output_shape, input_shape, element_size, stored.data(), stored.size());
}

}  // namespace mtsarray_test
