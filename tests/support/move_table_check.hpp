#pragma once
// What the tests of the GPU move_data table share: a growable storage for
// build_move_table, the plain reference of a list of movements, the
// kernel's threads run one after the other on the host, the check that a
// table is grouped by class and key, and random movement lists.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_data_thread.hpp"
#include "base/move_plan.hpp"

namespace move_table_check {

using namespace mtsarray::detail;
using namespace mtsarray::detail::gpu;

/// Storage for build_move_table: a vector, grown on demand.
class VectorStorage {
public:
    explicit VectorStorage(size_t capacity) : entries_(capacity) {}
    MoveTableEntry* data() { return entries_.data(); }
    size_t capacity() const { return entries_.size(); }
    void grow(size_t at_least) {
        grows_++;
        entries_.resize(std::max(at_least, 2 * entries_.size()));
    }
    size_t grows() const { return grows_; }

private:
    std::vector<MoveTableEntry> entries_;
    size_t grows_ = 0;
};

struct Layout {
    std::vector<uintptr_t> input_shape;
    std::vector<uintptr_t> output_shape;
    size_t element_size;
};

inline size_t count_of(const std::vector<uintptr_t>& shape) {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

/// output[s_out, c, p_out + x] = input[s_in, c, p_in + x], element by
/// element, movements in order.
inline void reference(std::vector<uint8_t>& output, const std::vector<uint8_t>& input, const Layout& layout,
               const std::vector<mts_data_movement_t>& movements) {
    size_t components = 1;
    for (size_t axis = 1; axis + 1 < layout.input_shape.size(); axis++) {
        components *= layout.input_shape[axis];
    }
    const size_t e = layout.element_size;
    const size_t p_in = layout.input_shape.back();
    const size_t p_out = layout.output_shape.back();
    for (const auto& m : movements) {
        for (size_t c = 0; c < components; c++) {
            for (size_t x = 0; x < m.properties_length; x++) {
                const size_t from = ((m.sample_in * components + c) * p_in + m.properties_start_in + x) * e;
                const size_t to = ((m.sample_out * components + c) * p_out + m.properties_start_out + x) * e;
                std::memcpy(output.data() + to, input.data() + from, e);
            }
        }
    }
}

/// Runs every thread of the grid of `classes` over the table, one after
/// the other.
inline void emulate(const std::vector<MoveTableEntry>& table, const MoveDataArguments& arguments,
             const MoveLaunchClasses& classes, bool narrow) {
    for (uint32_t block = 0; block < classes.blocks; block++) {
        for (uint32_t thread = 0; thread < threads_per_block; thread++) {
            if (narrow) {
                move_data_thread<true>(table.data(), arguments, block, thread);
            } else {
                move_data_thread<false>(table.data(), arguments, block, thread);
            }
        }
    }
}

/// The table after classify_move_table: each class a contiguous range of
/// entries of that class (each class once), with its own blocks, each key
/// (width) one contiguous range within it, and as many entries as before.
inline void check_classes(const std::vector<MoveTableEntry>& table, const MoveLaunchClasses& classes,
                   const MovePlan& plan) {
    if (table.empty()) {
        EXPECT_EQ(classes.count, 0u);
        return;
    }
    ASSERT_GE(classes.count, 1u);
    EXPECT_EQ(classes.ranges[0].first_entry, 0u);
    EXPECT_EQ(classes.ranges[classes.count].first_entry, table.size());
    EXPECT_EQ(classes.ranges[classes.count].first_block, classes.blocks);
    std::vector<bool> class_seen(move_size_classes, false);
    std::vector<bool> key_done(move_class_keys, false);
    for (uint32_t k = 0; k < classes.count; k++) {
        const auto& range = classes.ranges[k];
        EXPECT_LT(range.first_block, classes.ranges[k + 1].first_block) << "every class has a block";
        ASSERT_LT(range.size_class, move_size_classes);
        EXPECT_FALSE(class_seen[range.size_class]) << "class " << range.size_class << " in two ranges";
        class_seen[range.size_class] = true;
        uint32_t previous_key = move_class_keys;
        for (uint64_t i = range.first_entry; i < classes.ranges[k + 1].first_entry; i++) {
            const uint32_t key = move_class_key(table[i], plan.input_row_stride(), plan.output_row_stride());
            EXPECT_EQ(key, entry_class_key(table[i])) << "entry " << i << " holds its key";
            EXPECT_EQ(key / move_unit_widths, range.size_class) << "entry " << i;
            if (key != previous_key) {
                EXPECT_FALSE(key_done[key]) << "entry " << i << ": key " << key << " in two places";
                if (previous_key != move_class_keys) {
                    key_done[previous_key] = true;
                }
                previous_key = key;
            }
        }
    }
}

/// Movements writing distinct output rows (a GPU does not order writes of
/// one element by two movements), with random property ranges.
inline std::vector<mts_data_movement_t> random_movements(std::mt19937_64& rng, const Layout& layout, size_t count,
                                                  bool whole_rows) {
    const uintptr_t samples_out = layout.output_shape.front();
    const uintptr_t samples_in = layout.input_shape.front();
    const uintptr_t p_in = layout.input_shape.back();
    const uintptr_t p_out = layout.output_shape.back();
    std::vector<uintptr_t> outputs(samples_out);
    std::iota(outputs.begin(), outputs.end(), 0);
    std::shuffle(outputs.begin(), outputs.end(), rng);
    std::vector<mts_data_movement_t> movements;
    for (size_t i = 0; i < count && i < samples_out; i++) {
        mts_data_movement_t m;
        m.sample_in = std::uniform_int_distribution<uintptr_t>(0, samples_in - 1)(rng);
        m.sample_out = outputs[i];
        if (whole_rows) {
            m.properties_length = std::min(p_in, p_out);
            m.properties_start_in = 0;
            m.properties_start_out = 0;
        } else {
            m.properties_length = std::uniform_int_distribution<uintptr_t>(0, std::min(p_in, p_out))(rng);
            m.properties_start_in = std::uniform_int_distribution<uintptr_t>(0, p_in - m.properties_length)(rng);
            m.properties_start_out = std::uniform_int_distribution<uintptr_t>(0, p_out - m.properties_length)(rng);
        }
        movements.push_back(m);
    }
    return movements;
}

/// Movements that coalesce in places: runs of 1-3 consecutive samples with
/// the same ranges, the runs themselves scattered.
inline std::vector<mts_data_movement_t> runs_of_samples(std::mt19937_64& rng, uintptr_t samples, uintptr_t properties,
                                                 size_t count) {
    std::vector<mts_data_movement_t> movements;
    while (movements.size() < count) {
        const uintptr_t length = rng() % (properties + 1);
        const uintptr_t start_in = rng() % (properties - length + 1);
        const uintptr_t start_out = rng() % (properties - length + 1);
        const uintptr_t first_in = rng() % (samples - 3);
        const uintptr_t first_out = rng() % (samples - 3);
        for (uintptr_t k = 0, n = 1 + rng() % 3; k < n && movements.size() < count; k++) {
            movements.push_back({first_in + k, first_out + k, start_in, start_out, length});
        }
    }
    return movements;
}

}  // namespace move_table_check
