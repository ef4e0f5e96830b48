// MovePlan (src/base/move_plan.cpp) unit tests: validation messages, coalescing
// of consecutive movements into runs, collapse of whole rows into one
// contiguous copy, and the alignment the kernels pick their width from.

#include <cstdint>
#include <deque>
#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/move_plan.hpp"
#include "support/kept_move_plan.hpp"

using mtsarray::detail::MovePlan;
using mtsarray::detail::MoveRun;

namespace {

// the plans' movement lists live for the whole run
constexpr auto plan = mtsarray_test::kept_plan;

// The runs of a plan, after checking its movements (as a backend does).
std::vector<MoveRun> runs_of(const MovePlan& plan) {
    plan.validate();
    std::vector<MoveRun> runs;
    plan.for_each_run([&](const MoveRun& run) { runs.push_back(run); });
    return runs;
}

uint64_t total_rows(const MovePlan& plan) {
    uint64_t rows = 0;
    for (const auto& run : runs_of(plan)) {
        rows += run.rows;
    }
    return rows;
}

uint64_t total_bytes(const MovePlan& plan) {
    uint64_t bytes = 0;
    for (const auto& run : runs_of(plan)) {
        bytes += run.rows * run.bytes;
    }
    return bytes;
}

void expect_run(const MoveRun& run, uint64_t input_offset, uint64_t output_offset, uint64_t bytes, uint64_t rows) {
    EXPECT_EQ(run.input_offset, input_offset);
    EXPECT_EQ(run.output_offset, output_offset);
    EXPECT_EQ(run.bytes, bytes);
    EXPECT_EQ(run.rows, rows);
}

std::string error_of(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
                     const mts_data_movement_t* movements, size_t count) {
    try {
        MovePlan(output_shape, input_shape, 8, movements, count).validate();
    } catch (const mtsarray::detail::Error& error) {
        return error.what();
    }
    return "no error";
}

std::string error_of(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
                     const std::vector<mts_data_movement_t>& movements) {
    return error_of(output_shape, input_shape, movements.data(), movements.size());
}

TEST(MovePlan, OneMovementIsOneRunPerComponentRow) {
    // [samples, 3 components, properties]: 3 rows per movement
    auto p = plan({4, 3, 5}, {6, 3, 7}, 4, {{2, 1, 1, 2, 3}});
    ASSERT_EQ(runs_of(p).size(), 1u);
    expect_run(runs_of(p)[0], (2 * 3 * 7 + 1) * 4, (1 * 3 * 5 + 2) * 4, 3 * 4, 3);
    EXPECT_EQ(p.input_row_stride(), 7u * 4);
    EXPECT_EQ(p.output_row_stride(), 5u * 4);
    EXPECT_EQ(total_rows(p), 3u);
    EXPECT_EQ(total_bytes(p), 3u * 3 * 4);
    EXPECT_EQ(p.element_size(), 4u);
}

TEST(MovePlan, ConsecutiveSamplesCoalesceIntoOneRun) {
    auto p = plan({10, 2, 5}, {10, 2, 6}, 8, {{3, 0, 1, 0, 4}, {4, 1, 1, 0, 4}, {5, 2, 1, 0, 4}});
    ASSERT_EQ(runs_of(p).size(), 1u);
    expect_run(runs_of(p)[0], (3 * 2 * 6 + 1) * 8, 0, 4 * 8, 6);
    EXPECT_EQ(total_rows(p), 6u);
    EXPECT_EQ(total_bytes(p), 6u * 4 * 8);
}

TEST(MovePlan, ScatteredMovementsStaySeparate) {
    // not consecutive in the input, not consecutive in the output, different
    // property ranges, different lengths: four runs
    auto p = plan({10, 6}, {10, 6}, 2,
                  {{0, 0, 0, 0, 3}, {2, 1, 0, 0, 3}, {3, 5, 0, 0, 3}, {4, 6, 1, 0, 3}, {5, 7, 1, 0, 2}});
    ASSERT_EQ(runs_of(p).size(), 5u);
    expect_run(runs_of(p)[1], 2 * 6 * 2, 1 * 6 * 2, 6, 1);
    expect_run(runs_of(p)[4], (5 * 6 + 1) * 2, 7 * 6 * 2, 4, 1);
    EXPECT_EQ(total_rows(p), 5u);
}

TEST(MovePlan, RunsBreakAndRestart) {
    // 0->0, 1->1 coalesce; 5->2 breaks; 6->3, 7->4 coalesce again
    auto p = plan({5, 4}, {8, 4}, 1, {{0, 0, 0, 0, 2}, {1, 1, 0, 0, 2}, {5, 2, 0, 0, 2}, {6, 3, 0, 0, 2},
                                      {7, 4, 0, 0, 2}});
    ASSERT_EQ(runs_of(p).size(), 2u);
    expect_run(runs_of(p)[0], 0, 0, 2, 2);
    expect_run(runs_of(p)[1], 5 * 4, 2 * 4, 2, 3);
}

TEST(MovePlan, WholeRowsCollapseIntoOneContiguousCopy) {
    // every property on both sides, consecutive samples: one memcpy
    auto p = plan({8, 3, 5}, {9, 3, 5}, 4, {{2, 4, 0, 0, 5}, {3, 5, 0, 0, 5}, {4, 6, 0, 0, 5}});
    ASSERT_EQ(runs_of(p).size(), 1u);
    expect_run(runs_of(p)[0], 2 * 15 * 4, 4 * 15 * 4, 3 * 15 * 4, 1);
    EXPECT_EQ(total_bytes(p), 3u * 15 * 4);
    EXPECT_EQ(total_rows(p), 1u);

    // whole rows of the input only (output rows are longer): no collapse
    auto q = plan({8, 3, 6}, {9, 3, 5}, 4, {{2, 4, 0, 0, 5}, {3, 5, 0, 0, 5}});
    ASSERT_EQ(runs_of(q).size(), 1u);
    expect_run(runs_of(q)[0], 2 * 15 * 4, 4 * 18 * 4, 5 * 4, 6);
}

TEST(MovePlan, ZeroLengthMovementsAndEmptyComponentsAreSkipped) {
    auto p = plan({3, 4}, {3, 4}, 8, {{0, 0, 1, 1, 0}, {2, 2, 4, 4, 0}});
    EXPECT_TRUE(runs_of(p).empty());
    EXPECT_FALSE(p.trivially_empty());

    auto q = plan({3, 0, 4}, {3, 0, 4}, 8, {{0, 1, 0, 0, 4}});
    EXPECT_TRUE(runs_of(q).empty());
    EXPECT_TRUE(q.trivially_empty());

    auto r = plan({3, 4}, {3, 4}, 8, {});
    EXPECT_TRUE(runs_of(r).empty());
    EXPECT_TRUE(r.trivially_empty());
    auto s = MovePlan({3, 4}, {3, 4}, 8, nullptr, 0);
    EXPECT_TRUE(runs_of(s).empty());
}

TEST(MovePlan, CheckedIterationStopsAtTheFirstBadMovement) {
    // movements 0 and 1 are fine, 2 is out of range, 3 would be fine
    const std::vector<mts_data_movement_t> movements = {
        {0, 0, 0, 0, 2}, {3, 1, 0, 0, 2}, {1, 9, 0, 0, 2}, {2, 2, 0, 0, 2}};
    auto p = plan({4, 4}, {4, 4}, 4, movements);
    std::vector<MoveRun> seen;
    EXPECT_FALSE(p.for_each_valid_run([&](const MoveRun& run) { seen.push_back(run); }));
    // what was visited covers movements before the bad one only
    uint64_t rows = 0;
    for (const auto& run : seen) {
        rows += run.rows;
    }
    EXPECT_LE(rows, 2u);
    EXPECT_EQ(error_of({4, 4}, {4, 4}, movements), "movement 2: sample_out = 9 is out of range for an output with 4 samples");

    // all valid: the same runs as the unchecked iteration
    auto q = plan({4, 4}, {4, 4}, 4, {{0, 0, 0, 0, 2}, {1, 1, 0, 0, 2}, {3, 2, 1, 1, 3}});
    std::vector<MoveRun> checked;
    EXPECT_TRUE(q.for_each_valid_run([&](const MoveRun& run) { checked.push_back(run); }));
    const auto unchecked = runs_of(q);
    ASSERT_EQ(checked.size(), unchecked.size());
    for (size_t i = 0; i < checked.size(); i++) {
        expect_run(checked[i], unchecked[i].input_offset, unchecked[i].output_offset, unchecked[i].bytes,
                   unchecked[i].rows);
    }

    // an empty component axis copies nothing, but still checks
    auto r = plan({4, 0, 4}, {4, 0, 4}, 4, {{0, 7, 0, 0, 1}});
    EXPECT_FALSE(r.for_each_valid_run([](const MoveRun&) { ADD_FAILURE() << "nothing to visit"; }));
}

TEST(MovePlan, ValidationMessages) {
    constexpr uintptr_t max = std::numeric_limits<uintptr_t>::max();
    EXPECT_EQ(error_of({3, 4}, {2, 4}, {{0, 0, 0, 0, 1}, {2, 0, 0, 0, 1}}),
              "movement 1: sample_in = 2 is out of range for an input with 2 samples");
    EXPECT_EQ(error_of({3, 4}, {2, 4}, {{0, 3, 0, 0, 1}}),
              "movement 0: sample_out = 3 is out of range for an output with 3 samples");
    EXPECT_EQ(error_of({3, 4}, {2, 5}, {{0, 0, 4, 0, 2}}),
              "movement 0: properties_start_in = 4 with properties_length = 2 goes past the 5 properties of the "
              "input");
    EXPECT_EQ(error_of({3, 4}, {2, 5}, {{0, 0, 0, 3, 2}}),
              "movement 0: properties_start_out = 3 with properties_length = 2 goes past the 4 properties of the "
              "output");
    EXPECT_EQ(error_of({3, 4}, {2, 5}, {{0, 0, max, 0, 2}}),
              "movement 0: properties_start_in = 18446744073709551615 with properties_length = 2 goes past the 5 "
              "properties of the input");
    EXPECT_EQ(error_of({3, 4}, {2, 5}, {{0, 0, 2, 0, max}}),
              "movement 0: properties_start_in = 2 with properties_length = 18446744073709551615 goes past the 5 "
              "properties of the input");
    EXPECT_EQ(error_of({3, 4}, {2, 5}, {{0, 0, 0, max - 1, 2}}),
              "movement 0: properties_start_out = 18446744073709551614 with properties_length = 2 goes past the "
              "4 properties of the output");
    EXPECT_EQ(error_of({3, 2, 4}, {2, 3, 4}, {}),
              "input [2, 3, 4] and output [3, 2, 4] do not have the same component axes");
    EXPECT_EQ(error_of({3, 2, 4}, {2, 4}, {}), "input [2, 4] and output [3, 2, 4] do not have the same component axes");
    EXPECT_EQ(error_of({4}, {4}, {}),
              "move_data needs arrays with at least two axes (samples and properties), got input [4] and output "
              "[4]");
    EXPECT_EQ(error_of({}, {2, 2}, {}),
              "move_data needs arrays with at least two axes (samples and properties), got input [2, 2] and output "
              "[]");
    EXPECT_EQ(error_of({3, 4}, {3, 4}, nullptr, 5), "movements is NULL but movements_count = 5");
    // samples are validated even for zero-length movements
    EXPECT_EQ(error_of({3, 4}, {2, 4}, {{7, 0, 0, 0, 0}}),
              "movement 0: sample_in = 7 is out of range for an input with 2 samples");
    // an empty array takes no movement at all
    EXPECT_EQ(error_of({0, 4}, {2, 4}, {{0, 0, 0, 0, 0}}),
              "movement 0: sample_out = 0 is out of range for an output with 0 samples");
}

}  // namespace

// for_each_valid_run reads each movement once: a visitor that writes into
// the movements (a table built in the same memory) can not turn a checked
// movement into an unchecked one. Here the first run visited overwrites a
// later movement with a movement out of range: every run visited stays
// inside both arrays, and the pass, which reads each movement when it comes
// to it, stops at the new value.
TEST(MovePlan, ValidRunsAreMadeOfTheValuesChecked) {
    for (size_t changed : {size_t(5), size_t(100), size_t(127), size_t(128), size_t(300), size_t(999)}) {
        SCOPED_TRACE(::testing::Message() << "movement " << changed << " changed by the visitor");
        std::vector<mts_data_movement_t> movements(1000);
        for (size_t i = 0; i < movements.size(); i++) {
            movements[i] = {(i * 7) % 50, (i * 3) % 40, 0, 0, 2};  // scattered: one run each
        }
        const MovePlan scattered({40, 4}, {50, 4}, 8, movements.data(), movements.size());
        size_t visits = 0;
        bool outside = false;
        const bool valid = scattered.for_each_valid_run([&](const MoveRun& run) {
            if (visits++ == 0) {
                movements[changed].sample_in = uintptr_t(1) << 40;
            }
            outside |= run.input_offset + run.bytes * run.rows > scattered.input_bytes() ||
                       run.output_offset + run.bytes * run.rows > scattered.output_bytes();
        });
        EXPECT_FALSE(outside);
        // the change is made before the pass reads that movement
        EXPECT_FALSE(valid) << visits << " runs visited";
        EXPECT_EQ(visits, changed - 1) << "the runs of the movements before it (the last one still open)";
    }
}
