// The pieces of host move_data that decide what may run in parallel:
// MovePlan::validate() (a conservative branch-free pass, then the exact
// check) against a plain reference on random and edge-case movements, the
// order it reports, and how move_data() splits plans.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/move_data.hpp"
#include "cpu/threads/thread_count.hpp"
#include "base/error.hpp"
#include "base/move_plan.hpp"

using mtsarray::detail::MovePlan;
using mtsarray::detail::MoveSummary;
namespace cpu = mtsarray::detail::cpu;

namespace {

struct Limits {
    uintptr_t samples_in, samples_out, properties_in, properties_out;
};

bool reference_in_range(const mts_data_movement_t& m, const Limits& l) {
    return m.sample_in < l.samples_in && m.sample_out < l.samples_out && m.properties_start_in <= l.properties_in &&
           m.properties_length <= l.properties_in - m.properties_start_in &&
           m.properties_start_out <= l.properties_out &&
           m.properties_length <= l.properties_out - m.properties_start_out;
}

// values near the limits, zero, and huge ones (2^62, 2^63, max)
uintptr_t edge_value(std::mt19937_64& rng, uintptr_t limit) {
    constexpr uintptr_t max = std::numeric_limits<uintptr_t>::max();
    const uintptr_t choices[] = {0, 1, limit == 0 ? 0 : limit - 1, limit, limit + 1, uintptr_t(1) << 62,
                                 (uintptr_t(1) << 62) - 1, uintptr_t(1) << 63, max, max - limit};
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
        return choices[std::uniform_int_distribution<size_t>(0, std::size(choices) - 1)(rng)];
    }
    return limit == 0 ? 0 : std::uniform_int_distribution<uintptr_t>(0, limit - 1)(rng);
}

// validate() as the thread pool runs it: scan_part() over random
// consecutive parts, scanned in reverse order, then summarize().
MoveSummary validate_in_parts(const MovePlan& plan, std::mt19937_64& rng) {
    const size_t count = plan.movements_count();
    if (count == 0) {
        return plan.summarize(nullptr, 0, nullptr);
    }
    std::vector<size_t> cuts = {0, count};
    const size_t extra = std::uniform_int_distribution<size_t>(0, std::min<size_t>(count - 1, 6))(rng);
    for (size_t i = 0; i < extra; i++) {
        cuts.push_back(std::uniform_int_distribution<size_t>(1, count - 1)(rng));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<mtsarray::detail::MoveScan> parts(cuts.size() - 1);
    std::vector<mts_data_movement_t> copy(count);
    for (size_t i = parts.size(); i-- > 0;) {
        parts[i] = plan.scan_part(cuts[i], cuts[i + 1], copy.data());
    }
    const MoveSummary summary = plan.summarize(parts.data(), parts.size(), copy.data());
    if (summary.one_run) {
        // a list that is one run keeps its first movement only: the rest
        // follows from it
        MovePlan::fill_run(copy.data(), 0, count);
    }
    for (size_t i = 0; i < count; i++) {
        EXPECT_EQ(std::memcmp(&copy[i], &plan.movement(i), sizeof(mts_data_movement_t)), 0) << "movement " << i;
    }
    return summary;
}

}  // namespace

TEST(MovePlanValidation, AgreesWithAPlainCheckOnRandomMovements) {
    std::mt19937_64 rng(12);
    size_t rejected = 0;
    size_t accepted = 0;
    for (int trial = 0; trial < 20000; trial++) {
        const Limits limits = {std::uniform_int_distribution<uintptr_t>(0, 6)(rng),
                               std::uniform_int_distribution<uintptr_t>(0, 6)(rng),
                               std::uniform_int_distribution<uintptr_t>(0, 9)(rng),
                               std::uniform_int_distribution<uintptr_t>(0, 9)(rng)};
        const size_t count = std::uniform_int_distribution<size_t>(0, 4)(rng);
        std::vector<mts_data_movement_t> movements(count);
        for (auto& m : movements) {
            m.sample_in = edge_value(rng, limits.samples_in);
            m.sample_out = edge_value(rng, limits.samples_out);
            m.properties_start_in = edge_value(rng, limits.properties_in);
            m.properties_start_out = edge_value(rng, limits.properties_out);
            m.properties_length = edge_value(rng, std::min(limits.properties_in, limits.properties_out) + 1);
        }
        size_t first_bad = count;
        for (size_t i = 0; i < count && first_bad == count; i++) {
            if (!reference_in_range(movements[i], limits)) {
                first_bad = i;
            }
        }
        const MovePlan plan({limits.samples_out, 2, limits.properties_out}, {limits.samples_in, 2, limits.properties_in},
                            8, movements.data(), movements.size());
        // in parts: the same error, or the same summary
        std::string parts_error;
        MoveSummary in_parts = {};
        try {
            in_parts = validate_in_parts(plan, rng);
        } catch (const mtsarray::detail::Error& error) {
            parts_error = error.what();
        }
        try {
            const MoveSummary summary = plan.validate();
            ASSERT_EQ(parts_error, "") << "trial " << trial;
            EXPECT_EQ(in_parts.bytes, summary.bytes);
            EXPECT_EQ(in_parts.output_samples_increase, summary.output_samples_increase);
            EXPECT_EQ(in_parts.one_run, summary.one_run);
            ASSERT_EQ(first_bad, count) << "accepted a bad movement (trial " << trial << ")";
            accepted++;
            bool increasing = true;
            for (size_t i = 1; i < count; i++) {
                increasing = increasing && movements[i].sample_out > movements[i - 1].sample_out;
            }
            // claiming an order that is not there would let threads race
            if (summary.output_samples_increase) {
                ASSERT_TRUE(increasing) << "trial " << trial;
            }
            uint64_t elements = 0;
            for (const auto& m : movements) {
                elements += m.properties_length;
            }
            EXPECT_EQ(summary.bytes, elements * 2 * 8);
            // claiming one run that is not would copy the wrong rows
            if (summary.one_run) {
                ASSERT_GE(count, 1u);
                for (size_t i = 1; i < count; i++) {
                    ASSERT_EQ(movements[i].sample_in, movements[i - 1].sample_in + 1) << "trial " << trial;
                    ASSERT_EQ(movements[i].sample_out, movements[i - 1].sample_out + 1) << "trial " << trial;
                    ASSERT_EQ(movements[i].properties_start_in, movements[0].properties_start_in);
                    ASSERT_EQ(movements[i].properties_start_out, movements[0].properties_start_out);
                    ASSERT_EQ(movements[i].properties_length, movements[0].properties_length);
                }
            }
        } catch (const mtsarray::detail::Error& error) {
            EXPECT_EQ(parts_error, error.what()) << "trial " << trial;
            ASSERT_NE(first_bad, count) << "rejected valid movements: " << error.what();
            EXPECT_NE(std::string(error.what()).find("movement " + std::to_string(first_bad) + ":"), std::string::npos)
                << error.what();
            rejected++;
        }
    }
    EXPECT_GT(rejected, 1000u);
    EXPECT_GT(accepted, 1000u);
}

TEST(MovePlanValidation, SeesIncreasingOutputSamples) {
    std::vector<mts_data_movement_t> movements = {{5, 0, 0, 0, 2}, {1, 2, 0, 0, 2}, {0, 7, 0, 0, 2}};
    const MovePlan plan({8, 4}, {8, 4}, 4, movements.data(), movements.size());
    EXPECT_TRUE(plan.validate().output_samples_increase);
    movements[2].sample_out = 2;  // the same sample twice
    EXPECT_FALSE(plan.validate().output_samples_increase);
    movements[2].sample_out = 1;  // going back
    EXPECT_FALSE(plan.validate().output_samples_increase);
}

TEST(MovePlanValidation, SeesASingleRun) {
    // samples 3, 4, 5 -> 1, 2, 3, properties [1, 3) -> [0, 2): one run of 3 x 2 rows
    std::vector<mts_data_movement_t> movements = {{3, 1, 1, 0, 2}, {4, 2, 1, 0, 2}, {5, 3, 1, 0, 2}};
    const MovePlan plan({6, 2, 4}, {8, 2, 3}, 8, movements.data(), movements.size());
    ASSERT_TRUE(plan.validate().one_run);
    const auto run = plan.single_run();
    EXPECT_EQ(run.input_offset, (3 * 2 * 3 + 1) * 8u);
    EXPECT_EQ(run.output_offset, (1 * 2 * 4 + 0) * 8u);
    EXPECT_EQ(run.bytes, 16u);
    EXPECT_EQ(run.rows, 6u);
    // whole rows: one block
    std::vector<mts_data_movement_t> whole = {{3, 1, 0, 0, 3}, {4, 2, 0, 0, 3}};
    const MovePlan whole_plan({6, 2, 3}, {8, 2, 3}, 8, whole.data(), whole.size());
    ASSERT_TRUE(whole_plan.validate().one_run);
    EXPECT_EQ(whole_plan.single_run().bytes, 2 * 2 * 3 * 8u);
    EXPECT_EQ(whole_plan.single_run().rows, 1u);
    // a gap, another range, another length, none at all
    for (auto change : {0, 1, 2}) {
        auto broken = movements;
        if (change == 0) {
            broken[2].sample_in = 7;
        } else if (change == 1) {
            broken[1].properties_start_out = 1;
        } else {
            broken[2].properties_length = 1;
        }
        const MovePlan broken_plan({6, 2, 4}, {8, 2, 3}, 8, broken.data(), broken.size());
        EXPECT_FALSE(broken_plan.validate().one_run) << change;
    }
    const MovePlan empty({6, 2, 4}, {8, 2, 3}, 8, nullptr, 0);
    EXPECT_FALSE(empty.validate().one_run);
}

// validate() compares the ranges block by block while the list may still
// be one run: long runs, with one field broken anywhere (first block, a
// block boundary, far in), and orders that go back after a break.
TEST(MovePlanValidation, SeesRunsAndOrderInLongLists) {
    std::mt19937_64 rng(7);
    const uintptr_t samples = 3000;
    const std::vector<uintptr_t> input_shape = {samples, 3, 40};
    const std::vector<uintptr_t> output_shape = {samples, 3, 50};
    for (size_t trial = 0; trial < 600; trial++) {
        const size_t count = std::uniform_int_distribution<size_t>(1, 1200)(rng);
        const uintptr_t first_in = std::uniform_int_distribution<uintptr_t>(0, samples - count)(rng);
        const uintptr_t first_out = std::uniform_int_distribution<uintptr_t>(0, samples - count)(rng);
        const uintptr_t start_in = std::uniform_int_distribution<uintptr_t>(0, 20)(rng);
        const uintptr_t start_out = std::uniform_int_distribution<uintptr_t>(0, 30)(rng);
        const uintptr_t length = std::uniform_int_distribution<uintptr_t>(0, 20)(rng);
        std::vector<mts_data_movement_t> movements(count);
        for (size_t i = 0; i < count; i++) {
            movements[i] = {first_in + i, first_out + i, start_in, start_out, length};
        }
        // 0: untouched; 1-5: one field of one movement changed (staying in range)
        const int change = std::uniform_int_distribution<int>(0, 5)(rng);
        const size_t pick = std::uniform_int_distribution<size_t>(0, 3)(rng);
        const size_t at = pick == 0 ? count - 1 : pick == 1 ? std::min<size_t>(count - 1, 256) :
                                                  std::uniform_int_distribution<size_t>(0, count - 1)(rng);
        auto& m = movements[at];
        switch (change) {
        case 1: m.sample_in = (m.sample_in + 7) % samples; break;
        case 2: m.sample_out = m.sample_out >= 2 ? m.sample_out - 2 : m.sample_out + 2; break;
        case 3: m.properties_start_in = m.properties_start_in == 0 ? 1 : m.properties_start_in - 1; break;
        case 4: m.properties_start_out = m.properties_start_out == 0 ? 1 : m.properties_start_out - 1; break;
        case 5: m.properties_length = m.properties_length == 0 ? 1 : m.properties_length - 1; break;
        default: break;
        }
        bool one_run = true;
        bool increasing = true;
        uint64_t elements = 0;
        for (size_t i = 0; i < count; i++) {
            const auto& previous = movements[i == 0 ? 0 : i - 1];
            const auto& current = movements[i];
            elements += current.properties_length;
            if (i == 0) {
                continue;
            }
            increasing = increasing && current.sample_out > previous.sample_out;
            one_run = one_run && current.sample_in == previous.sample_in + 1 &&
                      current.sample_out == previous.sample_out + 1 &&
                      current.properties_start_in == movements[0].properties_start_in &&
                      current.properties_start_out == movements[0].properties_start_out &&
                      current.properties_length == movements[0].properties_length;
        }
        const MovePlan plan(output_shape, input_shape, 4, movements.data(), count);
        for (const MoveSummary& summary : {plan.validate(), validate_in_parts(plan, rng)}) {
            ASSERT_EQ(summary.one_run, one_run) << "trial " << trial << ", change " << change << " at " << at;
            ASSERT_EQ(summary.output_samples_increase, increasing) << "trial " << trial << ", change " << change;
            ASSERT_EQ(summary.bytes, elements * 3 * 4) << "trial " << trial;
        }
    }
}

TEST(MoveDataSplit, SplitsOnlyWhatCanNotOverlap) {
    const size_t count = 4096;
    std::vector<mts_data_movement_t> movements(count);
    for (size_t i = 0; i < count; i++) {
        movements[i] = {(i * 7) % count, i, 0, 0, 16};
    }
    const MovePlan plan({count, 16}, {count, 16}, 8, movements.data(), count);
    auto split = [&](size_t threads) { return cpu::choose_split(plan, plan.validate(), threads); };
    EXPECT_EQ(split(1), cpu::MoveDataSplit::serial);
    EXPECT_EQ(split(4), cpu::MoveDataSplit::movement_blocks);

    // output samples permuted: still disjoint (the bitmap says so)
    std::vector<mts_data_movement_t> permuted = movements;
    for (size_t i = 0; i < count; i++) {
        permuted[i].sample_out = (i * 11) % count;
    }
    const MovePlan permuted_plan({count, 16}, {count, 16}, 8, permuted.data(), count);
    EXPECT_FALSE(permuted_plan.validate().output_samples_increase);
    EXPECT_EQ(cpu::choose_split(permuted_plan, permuted_plan.validate(), 4), cpu::MoveDataSplit::movement_blocks);

    // one output sample written twice: the serial order decides which wins
    permuted[count - 1].sample_out = permuted[0].sample_out;
    const MovePlan twice_plan({count, 16}, {count, 16}, 8, permuted.data(), count);
    EXPECT_EQ(cpu::choose_split(twice_plan, twice_plan.validate(), 4), cpu::MoveDataSplit::serial);

    // a few long movements: their bytes are cut instead
    const MovePlan few_plan({count, 16}, {count, 16}, 8, movements.data(), 8);
    EXPECT_EQ(cpu::choose_split(few_plan, few_plan.validate(), 4), cpu::MoveDataSplit::byte_pieces);
}

// copy_movements(): the copy and the samples reached, against a plain loop,
// for lists short enough for the calling thread and long enough for the
// pool, at several thread counts; in place (`copy` == `from`) too.
TEST(CopyMovements, CopiesAndReachesLikeAPlainLoopOnEveryThreadCount) {
    std::mt19937_64 rng(31);
    const size_t previous = cpu::thread_count();
    for (int64_t threads : {1, 2, 4, 16}) {
        cpu::set_thread_count(threads);
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(4095), size_t(4097), size_t(100003)}) {
            SCOPED_TRACE(std::to_string(count) + " movements on " + std::to_string(threads) + " threads");
            std::vector<mts_data_movement_t> movements(count);
            uintptr_t input_samples = 0;
            uintptr_t output_samples = 0;
            for (auto& movement : movements) {
                // one huge sample now and then: the reach is a plain maximum
                const uintptr_t huge = rng() % 1000 == 0 ? uintptr_t(1) << 50 : 0;
                movement = {huge + rng() % 5000, rng() % 7000, rng() % 9, rng() % 9, rng() % 9};
                input_samples = std::max(input_samples, movement.sample_in + 1);
                output_samples = std::max(output_samples, movement.sample_out + 1);
            }
            // memcmp of no bytes still needs valid pointers (an empty vector has none)
            auto same_movements = [count](const mts_data_movement_t* a, const mts_data_movement_t* b) {
                return count == 0 || std::memcmp(a, b, count * sizeof(mts_data_movement_t)) == 0;
            };
            std::vector<mts_data_movement_t> copy(count + 1, mts_data_movement_t{9, 9, 9, 9, 9});
            const cpu::SampleReach reach = cpu::copy_movements(movements.data(), copy.data(), count);
            EXPECT_EQ(reach.input_samples, input_samples);
            EXPECT_EQ(reach.output_samples, output_samples);
            EXPECT_TRUE(same_movements(copy.data(), movements.data()));
            EXPECT_EQ(copy[count].sample_in, 9u) << "wrote past the list";

            const cpu::SampleReach in_place = cpu::copy_movements(copy.data(), copy.data(), count);
            EXPECT_EQ(in_place.input_samples, input_samples);
            EXPECT_EQ(in_place.output_samples, output_samples);
            EXPECT_TRUE(same_movements(copy.data(), movements.data()));
        }
    }
    cpu::set_thread_count(static_cast<int64_t>(previous));
}

// ---- movements sharing their ranges --------------------------------------------------

namespace {

/// move_data's result computed element by element: for every movement, every
/// component row and every property of its range.
std::vector<double> reference_move(const std::vector<double>& output, const std::vector<double>& input,
                                   size_t components, size_t properties_out, size_t properties_in,
                                   const std::vector<mts_data_movement_t>& movements) {
    std::vector<double> result = output;
    for (const auto& m : movements) {
        for (size_t c = 0; c < components; c++) {
            for (size_t x = 0; x < m.properties_length; x++) {
                result[(m.sample_out * components + c) * properties_out + m.properties_start_out + x] =
                    input[(m.sample_in * components + c) * properties_in + m.properties_start_in + x];
            }
        }
    }
    return result;
}

}  // namespace

// Movements that share their ranges, with consecutive inputs whose outputs
// jump: they are merged into runs only where both sides are consecutive.
// Checked against the element-by-element reference, for lists longer than
// the short ones copied movement by movement, on one thread and several.
TEST(SharedRanges, MergeOnlyWhereInputsAndOutputsAreBothConsecutive) {
    std::mt19937_64 rng(40);
    struct Case {
        std::vector<mts_data_movement_t> movements;
        size_t components;
    };
    std::vector<Case> cases;
    {
        std::vector<mts_data_movement_t> jumps;  // {i, i + i/2}: outputs jump every other movement
        for (uintptr_t i = 0; i < 64; i++) {
            jumps.push_back({i, i + i / 2, 0, 0, 4});
        }
        cases.push_back({jumps, 1});
        cases.push_back({jumps, 3});
    }
    for (int trial = 0; trial < 40; trial++) {
        // consecutive inputs, outputs that are consecutive for a while then jump
        const size_t count = std::uniform_int_distribution<size_t>(17, 300)(rng);
        const uintptr_t start = std::uniform_int_distribution<uintptr_t>(0, 2)(rng);
        const uintptr_t length = std::uniform_int_distribution<uintptr_t>(1, 3)(rng);
        std::vector<mts_data_movement_t> movements;
        uintptr_t out = std::uniform_int_distribution<uintptr_t>(0, 3)(rng);
        const uintptr_t start_out = 6 - length - static_cast<uintptr_t>(trial % 2);
        for (uintptr_t i = 0; i < count; i++) {
            movements.push_back({i, out, start, start_out, length});
            const bool jump = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
            out += jump ? 1 + std::uniform_int_distribution<uintptr_t>(1, 4)(rng) : 1;
        }
        cases.push_back({movements, std::uniform_int_distribution<size_t>(1, 2)(rng)});
    }
    const size_t previous = cpu::thread_count();
    for (size_t threads : {size_t(1), size_t(4)}) {
        cpu::set_thread_count(static_cast<int64_t>(threads));
        for (size_t k = 0; k < cases.size(); k++) {
            const auto& movements = cases[k].movements;
            const size_t components = cases[k].components;
            const size_t properties = 6;
            uintptr_t samples_in = 0;
            uintptr_t samples_out = 0;
            for (const auto& m : movements) {
                samples_in = std::max(samples_in, m.sample_in + 1);
                samples_out = std::max(samples_out, m.sample_out + 1);
            }
            std::vector<double> input(samples_in * components * properties);
            std::vector<double> output(samples_out * components * properties);
            for (auto& value : input) {
                value = std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
            }
            for (auto& value : output) {
                value = std::uniform_real_distribution<double>(2.0, 3.0)(rng);
            }
            const auto expected = reference_move(output, input, components, properties, properties, movements);
            const auto shape = [&](uintptr_t samples) {
                return components == 1 ? std::vector<uintptr_t>{samples, properties}
                                       : std::vector<uintptr_t>{samples, components, properties};
            };
            const MovePlan plan(mtsarray::detail::Shape(shape(samples_out)), mtsarray::detail::Shape(shape(samples_in)),
                                sizeof(double), movements.data(), movements.size());
            cpu::move_data(output.data(), input.data(), plan);
            ASSERT_EQ(output, expected) << "case " << k << " (" << movements.size() << " movements, " << components
                                        << " components), " << threads << " threads";
        }
    }
    cpu::set_thread_count(static_cast<int64_t>(previous));
}
