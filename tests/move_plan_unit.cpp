// MovePlan (src/move_plan.cpp) unit tests: validation messages, coalescing
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

#include "error.hpp"
#include "move_plan.hpp"

using mtsarray::detail::MovePlan;
using mtsarray::detail::MoveRun;

namespace {

// A plan borrows its movements (it lives inside one move_data call); the
// lists made by these tests are kept alive here for the whole run.
MovePlan plan(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
              size_t element_size, const std::vector<mts_data_movement_t>& movements) {
    static std::deque<std::vector<mts_data_movement_t>> kept;
    const auto& stored = kept.emplace_back(movements);
    return MovePlan(output_shape, input_shape, element_size, stored.data(), stored.size());
}

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

// The two scans of validate()'s pass (the 2-lane loop of the baseline build
// and the AVX2 one that takes two movements at a time) must see the same
// bits on every list and every part of it: valid and invalid movements,
// one run or not, broken by a sample or a range, odd and even counts, parts
// starting and ending anywhere, across the 256-movement blocks.
TEST(MovePlan, BothScansSeeTheSameInEveryPart) {
    using mtsarray::detail::MoveScan;
    using mtsarray::detail::cpu::InstructionSet;
    if (!mtsarray::detail::cpu::cpu_has_avx2()) {
        GTEST_SKIP() << "this CPU has no AVX2: both scans are the baseline one";
    }
    std::mt19937_64 random(20261124);
    auto below = [&](uint64_t bound) { return bound == 0 ? 0 : random() % bound; };
    const uintptr_t huge = uintptr_t(1) << 63;
    size_t one_run_lists = 0;
    size_t flagged_lists = 0;
    for (int list = 0; list < 600; list++) {
        const uintptr_t samples_in = below(60);
        const uintptr_t samples_out = below(60);
        const uintptr_t properties_in = below(40);
        const uintptr_t properties_out = below(40);
        const size_t count = 1 + below(list % 3 == 0 ? 700 : 40);
        const uintptr_t length = below(std::min(properties_in, properties_out) + 1);
        const uintptr_t start_in = below(properties_in - length + 1);
        const uintptr_t start_out = below(properties_out - length + 1);
        const uintptr_t first_in = below(samples_in + 1);
        const uintptr_t first_out = below(samples_out + 1);
        std::vector<mts_data_movement_t> movements(count);
        for (size_t i = 0; i < count; i++) {  // one run, in range or not
            movements[i] = {first_in + i, first_out + i, start_in, start_out, length};
        }
        switch (list % 6) {
        case 0: break;  // one run
        case 1: {       // one sample or one range breaks it
            auto& movement = movements[below(count)];
            uintptr_t* fields[] = {&movement.sample_in, &movement.sample_out, &movement.properties_start_in,
                                   &movement.properties_start_out, &movement.properties_length};
            *fields[below(5)] += 1 + below(3);
            break;
        }
        case 2:  // scattered, in range
            for (auto& movement : movements) {
                const uintptr_t own_length = below(std::min(properties_in, properties_out) + 1);
                movement = {below(samples_in), below(samples_out), below(properties_in - own_length + 1),
                            below(properties_out - own_length + 1), own_length};
            }
            break;
        case 3:  // output samples going back somewhere
            movements[below(count)].sample_out = below(first_out + 1);
            break;
        default: {  // a few fields out of range, some of them huge
            for (int k = 0; k < 3; k++) {
                auto& movement = movements[below(count)];
                uintptr_t* fields[] = {&movement.sample_in, &movement.sample_out, &movement.properties_start_in,
                                       &movement.properties_start_out, &movement.properties_length};
                const uintptr_t values[] = {samples_in, samples_out, properties_in + 1, huge, huge - 1,
                                            ~uintptr_t(0)};
                *fields[below(5)] = values[below(6)];
            }
            break;
        }
        }
        const MovePlan checked = plan({samples_out, 3, properties_out}, {samples_in, 3, properties_in}, 8, movements);
        // the whole list, then parts of it
        std::vector<std::pair<size_t, size_t>> parts = {{0, count}};
        for (int k = 0; k < 6; k++) {
            const size_t begin = below(count);
            parts.emplace_back(begin, begin + 1 + below(count - begin));
        }
        for (const auto& [begin, end] : parts) {
            SCOPED_TRACE(::testing::Message() << "list " << list << " of " << count << " movements, part [" << begin
                                              << ", " << end << ")");
            const MoveScan baseline = checked.scan_part(begin, end, InstructionSet::baseline);
            const MoveScan best = checked.scan_part(begin, end, InstructionSet::best);
            EXPECT_EQ(best.out_of_range, baseline.out_of_range);
            EXPECT_EQ(best.not_one_run, baseline.not_one_run);
            EXPECT_EQ(best.out_of_order, baseline.out_of_order);
            EXPECT_EQ(best.elements, baseline.elements);
            if (begin == 0 && end == count) {
                one_run_lists += baseline.not_one_run == 0;
                flagged_lists += (baseline.out_of_range >> 62) != 0;
            }
        }
    }
    // the lists did cover both outcomes
    EXPECT_GT(one_run_lists, 50u);
    EXPECT_GT(flagged_lists, 100u);
}
