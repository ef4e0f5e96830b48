#pragma once
// The movement lists the GPU targets name, shared by the rows that time the
// GPU move_data (cuda_cases.cpp) and its host-side planning
// (gpu_planning_cases.cpp), so that both measure the very same plans.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <metatensor.h>

#include "harness.hpp"

namespace bench {

/// A move_data plan: shapes [samples, ..., properties] and the movements.
struct MovePattern {
    std::string name;
    std::vector<uintptr_t> input_shape;
    std::vector<uintptr_t> output_shape;
    std::vector<mts_data_movement_t> movements;
    std::vector<std::pair<std::string, std::string>> parameters;  // for the JSON file
};

/// 0 .. count-1, shuffled (always the same way) when `scattered`.
inline std::vector<size_t> sample_order(size_t count, bool scattered) {
    std::vector<size_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    if (scattered) {
        std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
    }
    return order;
}

/// `count` scattered movements, each with its own property range (lengths
/// 1 .. 32 of 64 properties, random starts on both sides).
inline MovePattern differing_ranges_pattern(size_t count) {
    constexpr size_t properties = 64;
    MovePattern p;
    p.input_shape = {count, properties};
    p.output_shape = {count, properties};
    const auto order = sample_order(count, true);
    std::mt19937_64 random(7);
    for (size_t i = 0; i < count; i++) {
        const size_t length = 1 + random() % 32;
        const size_t start_in = random() % (properties - length + 1);
        const size_t start_out = random() % (properties - length + 1);
        p.movements.push_back({order[i], i, start_in, start_out, length});
    }
    p.name = "moves=" + format_count(static_cast<double>(count)) + " differing ranges (1..32 of 64) scattered";
    p.parameters = {{"movements", std::to_string(count)}, {"property_ranges", "differing, 1..32 of 64"},
                    {"samples", "scattered"}};
    return p;
}

/// `count` movements all copying properties [16, 48) of 64 into [0, 32) of
/// 32: the case PyTorch does with one index_select + index_put_.
inline MovePattern shared_range_pattern(size_t count, bool scattered) {
    MovePattern p;
    p.input_shape = {count, 64};
    p.output_shape = {count, 32};
    const auto order = sample_order(count, scattered);
    for (size_t i = 0; i < count; i++) {
        p.movements.push_back({order[i], i, 16, 0, 32});
    }
    p.name = "moves=" + format_count(static_cast<double>(count)) + " shared range [16,48) of 64" +
             (scattered ? " scattered" : " in-order");
    p.parameters = {{"movements", std::to_string(count)}, {"property_ranges", "shared, [16, 48) of 64 -> [0, 32)"},
                    {"samples", scattered ? "scattered" : "in-order"}};
    return p;
}

}  // namespace bench
