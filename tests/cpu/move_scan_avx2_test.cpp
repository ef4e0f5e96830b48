// The CPU backend's scan of the movements (src/cpu/move_scan_avx2.hpp) against
// the portable one of MovePlan.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/move_plan.hpp"
#include "support/kept_move_plan.hpp"
#include "cpu/move_scan_avx2.hpp"

using mtsarray::detail::MovePlan;

namespace {

// the plans' movement lists live for the whole run
constexpr auto plan = mtsarray_test::kept_plan;

}  // namespace

// The two scans of validate()'s pass (MovePlan::scan_part, the 2-lane loop of
// the baseline build, and the CPU backend's AVX2 scan that takes two
// movements at a time) must see the same
// bits on every list and every part of it: valid and invalid movements,
// one run or not, broken by a sample or a range, odd and even counts, parts
// starting and ending anywhere, across the 256-movement blocks.
TEST(MoveScan, BothScansSeeTheSameInEveryPart) {
    using mtsarray::detail::MoveScan;
    using mtsarray::detail::cpu::scan_movements;
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
            std::vector<mts_data_movement_t> baseline_copy(count);
            std::vector<mts_data_movement_t> best_copy(count);
            MoveScan baseline = checked.scan_part(begin, end, baseline_copy.data());
            MoveScan best = scan_movements(checked, begin, end, best_copy.data());
            // a part that stayed one run stores its first movement only
            EXPECT_EQ(best.copied, baseline.copied);
            EXPECT_EQ(baseline.copied, baseline.not_one_run != 0 || end - begin <= 1);
            for (auto* scan : {&baseline, &best}) {
                if (!scan->copied) {
                    MovePlan::fill_run(scan == &baseline ? baseline_copy.data() : best_copy.data(), begin, end);
                }
            }
            for (size_t i = begin; i < end; i++) {
                EXPECT_EQ(std::memcmp(&baseline_copy[i], &movements[i], sizeof(mts_data_movement_t)), 0) << i;
                EXPECT_EQ(std::memcmp(&best_copy[i], &movements[i], sizeof(mts_data_movement_t)), 0) << i;
            }
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

// move_data's scan (scan_compact) stores the samples alone while the
// movements of a part share the ranges of its first one (none while they
// are one run), and every movement whole from the first one that differs:
// what it stored must give back every movement as it was, and its scan
// must say what validate()'s does, with either instruction set, for ranges
// that differ anywhere (the first movements, the middle, the last one), in
// runs and scattered lists.
TEST(MoveScan, CompactScanKeepsEveryMovement) {
    using mtsarray::detail::MoveScan;
    using mtsarray::detail::cpu::CompactScan;
    using mtsarray::detail::cpu::InstructionSet;
    using mtsarray::detail::cpu::scan_compact;
    std::mt19937_64 random(20261125);
    auto below = [&](uint64_t bound) { return bound == 0 ? 0 : random() % bound; };
    size_t compact_parts = 0;
    size_t whole_parts = 0;
    size_t run_parts = 0;
    for (int list = 0; list < 400; list++) {
        const uintptr_t samples_in = 1 + below(2000);
        const uintptr_t samples_out = 1 + below(2000);
        const uintptr_t properties = 1 + below(40);
        const size_t count = 1 + below(list % 2 == 0 ? 900 : 140);
        const uintptr_t length = below(properties + 1);
        const uintptr_t start_in = below(properties - length + 1);
        const uintptr_t start_out = below(properties - length + 1);
        std::vector<mts_data_movement_t> movements(count);
        for (size_t i = 0; i < count; i++) {
            movements[i] = {below(samples_in), below(samples_out), start_in, start_out, length};
        }
        if (list % 8 == 1) {  // in order
            for (size_t i = 0; i < count; i++) {
                movements[i].sample_in = i % samples_in;
                movements[i].sample_out = i % samples_out;
            }
        }
        if (list % 4 == 2 || list % 4 == 3) {  // one range differs somewhere
            auto& movement = movements[list % 8 == 2 ? count - 1 : below(count)];
            uintptr_t* fields[] = {&movement.properties_start_in, &movement.properties_start_out,
                                   &movement.properties_length};
            *fields[below(3)] += 1 + below(2);  // sometimes out of range too
        }
        if (list % 16 == 5) {  // a sample out of range
            movements[below(count)].sample_in = samples_in + below(3);
        }
        const MovePlan checked = plan({samples_out, 2, properties}, {samples_in, 2, properties}, 4, movements);
        std::vector<std::pair<size_t, size_t>> parts = {{0, count}};
        for (int k = 0; k < 4; k++) {
            const size_t begin = below(count);
            parts.emplace_back(begin, begin + 1 + below(count - begin));
        }
        for (const auto& [begin, end] : parts) {
            for (InstructionSet instructions : {InstructionSet::best, InstructionSet::baseline}) {
                SCOPED_TRACE(::testing::Message() << "list " << list << " of " << count << " movements, part ["
                                                  << begin << ", " << end << ")"
                                                  << (instructions == InstructionSet::best ? " best" : " baseline"));
                std::vector<mts_data_movement_t> copy(count);
                std::vector<uint64_t> samples(2 * count);
                const CompactScan compact = scan_compact(checked, begin, end, samples.data(), copy.data(),
                                                         instructions);
                bool shared = true;
                for (size_t i = begin; i < end; i++) {
                    shared &= movements[i].properties_start_in == movements[begin].properties_start_in &&
                              movements[i].properties_start_out == movements[begin].properties_start_out &&
                              movements[i].properties_length == movements[begin].properties_length;
                }
                EXPECT_EQ(compact.compact, shared);
                (compact.compact ? compact_parts : whole_parts)++;
                run_parts += compact.compact && !compact.scan.copied;
                EXPECT_EQ(std::memcmp(&copy[begin], &movements[begin], sizeof(mts_data_movement_t)), 0);
                for (size_t i = begin + 1; i < end; i++) {
                    mts_data_movement_t stored = copy[i];
                    if (compact.compact) {
                        // a part that stayed one run stores its first samples only
                        const uint64_t step = compact.scan.copied ? 0 : i - begin;
                        const size_t from = compact.scan.copied ? i : begin;
                        stored = {samples[2 * from] + step, samples[2 * from + 1] + step,
                                  copy[begin].properties_start_in, copy[begin].properties_start_out,
                                  copy[begin].properties_length};
                    }
                    EXPECT_EQ(std::memcmp(&stored, &movements[i], sizeof(mts_data_movement_t)), 0) << i;
                }
                const MoveScan whole = checked.scan_part(begin, end, nullptr);
                EXPECT_EQ(compact.scan.copied, !compact.compact || compact.scan.not_one_run != 0 || end - begin <= 1);
                EXPECT_EQ(compact.scan.begin, begin);
                EXPECT_EQ(compact.scan.end, end);
                EXPECT_EQ(compact.scan.out_of_range, whole.out_of_range);
                EXPECT_EQ(compact.scan.elements, whole.elements);
                EXPECT_EQ(compact.scan.not_one_run == 0, whole.not_one_run == 0);
                EXPECT_EQ(compact.scan.out_of_order >> 62, whole.out_of_order >> 62);
            }
        }
    }
    EXPECT_GT(compact_parts, 500u);
    EXPECT_GT(run_parts, 50u);
    EXPECT_GT(whole_parts, 500u);
}
