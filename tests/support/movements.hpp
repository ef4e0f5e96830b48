#pragma once
// Movement lists for the move_data tests on [samples, properties] float64
// arrays, and the result computed on the host to compare with.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "mtsarray.h"

namespace mtsarray_test {

/// count values start, start + 1, ...
inline std::vector<double> iota(size_t count, double start) {
    std::vector<double> values(count);
    std::iota(values.begin(), values.end(), start);
    return values;
}

/// move_data's result computed on the host.
inline std::vector<double> moved(std::vector<double> output, const std::vector<double>& input,
                                 uintptr_t input_properties, uintptr_t output_properties,
                                 const std::vector<mts_data_movement_t>& movements) {
    for (const auto& m : movements) {
        for (uintptr_t x = 0; x < m.properties_length; x++) {
            output[m.sample_out * output_properties + m.properties_start_out + x] =
                input[m.sample_in * input_properties + m.properties_start_in + x];
        }
    }
    return output;
}

/// `count` movements of `length` values scattered into every other sample
/// of the output (no two write the same row), in random order.
inline std::vector<mts_data_movement_t> scattered_movements(size_t count, uintptr_t length, uint64_t seed) {
    std::vector<uintptr_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<mts_data_movement_t> movements(count);
    for (size_t i = 0; i < count; i++) {
        movements[i] = {i, 2 * order[i], 0, 0, length};
    }
    return movements;
}

/// Like scattered_movements, with mixed lengths (1..64 values, so 8 B to
/// 512 B runs of float64) and misaligned property starts, for arrays of 64
/// properties: a table of several size classes.
inline std::vector<mts_data_movement_t> mixed_movements(size_t count, uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto movements = scattered_movements(count, 1, seed);
    for (auto& m : movements) {
        m.properties_length = 1 + rng() % 64;
        m.properties_start_in = rng() % (65 - m.properties_length);
        m.properties_start_out = rng() % (65 - m.properties_length);
    }
    return movements;
}

/// Every row of [samples, properties] to the same row.
inline std::vector<mts_data_movement_t> whole_rows(uintptr_t samples, uintptr_t properties) {
    std::vector<mts_data_movement_t> movements(samples);
    for (uintptr_t i = 0; i < samples; i++) {
        movements[i] = {i, i, 0, 0, properties};
    }
    return movements;
}

}  // namespace mtsarray_test
