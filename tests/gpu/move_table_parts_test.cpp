// A move_data table built in parts on several host threads
// (src/gpu/move_table_parts.hpp): the same entries as the table of one
// thread (but for runs cut at a part boundary), grouped by class and key as
// the kernel needs, moving what the reference moves; whatever order the
// parts run in, on the pool's threads or on one thread; a bad movement in
// any part refuses the whole list and writes nothing.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_data_thread.hpp"
#include "gpu/move_table_parts.hpp"
#include "base/host_tasks.hpp"
#include "base/move_plan.hpp"
#include "support/move_table_check.hpp"

using namespace mtsarray::detail;
using namespace mtsarray::detail::gpu;
using namespace move_table_check;

namespace {

/// Runs the tasks on the calling thread, last one first: a result that
/// depends on the order of the parts shows.
class BackwardsTasks final : public HostTasks {
public:
    size_t threads() const noexcept override { return 4; }
    void run(size_t tasks, size_t threads, void* object, void (*call)(void*, size_t)) const override {
        EXPECT_GE(threads, 1u);
        for (size_t task = tasks; task-- > 0;) {
            call(object, task);
        }
    }
};

struct PartsResult {
    bool valid;
    std::vector<MoveTableEntry> table;
    MoveTableSummary summary;
    MoveLaunchClasses classes;
};

PartsResult build_in_parts(const MovePlan& plan, const HostTasks& tasks, size_t parts, size_t capacity = 8) {
    VectorStorage storage(capacity);  // small: the table grows to its size
    PartsResult result;
    result.valid = build_move_table_in_parts(plan, storage, result.summary, result.classes, threads_per_block,
                                             max_blocks, tasks, tasks.threads(), parts);
    if (result.valid) {
        result.table.assign(storage.data(), storage.data() + result.summary.entries);
    }
    return result;
}

/// The entries sorted, to compare tables whatever their order.
std::vector<std::pair<uint64_t, uint64_t>> entry_set(const std::vector<MoveTableEntry>& table) {
    std::vector<std::pair<uint64_t, uint64_t>> entries;
    for (const MoveTableEntry& entry : table) {
        entries.emplace_back(entry.input, entry.output);
    }
    std::sort(entries.begin(), entries.end());
    return entries;
}

/// Builds `movements` in `parts` parts on `tasks` and checks the table:
/// grouped by class and key, its summary counting its keys, at least the
/// entries of one thread's table and at most one more per boundary (the
/// very same entries when no run crosses one), and moving on the host
/// (the kernel's threads, one after the other) what the reference moves.
void check_parts(const Layout& layout, const std::vector<mts_data_movement_t>& movements, const HostTasks& tasks,
                 size_t parts, bool runs_cross_boundaries, std::mt19937_64& rng) {
    const MovePlan plan(layout.output_shape, layout.input_shape, layout.element_size, movements.data(),
                        movements.size());
    const PartsResult result = build_in_parts(plan, tasks, parts);
    ASSERT_TRUE(result.valid);
    ASSERT_EQ(result.table.size(), result.summary.entries);
    check_classes(result.table, result.classes, plan);
    uint64_t keys[move_class_keys] = {};
    for (const MoveTableEntry& entry : result.table) {
        keys[entry_class_key(entry)]++;
    }
    for (uint32_t key = 0; key < move_class_keys; key++) {
        EXPECT_EQ(keys[key], result.summary.per_key[key]) << "key " << key;
    }

    VectorStorage storage(8);
    MoveTableSummary serial;
    ASSERT_TRUE(build_move_table(plan, storage, serial));
    EXPECT_EQ(result.summary.span, serial.span);
    EXPECT_GE(result.summary.entries, serial.entries);
    EXPECT_LE(result.summary.entries, serial.entries + parts - 1);
    if (!runs_cross_boundaries) {
        const std::vector<MoveTableEntry> serial_table(storage.data(), storage.data() + serial.entries);
        EXPECT_EQ(entry_set(result.table), entry_set(serial_table));
    }

    const size_t input_bytes = count_of(layout.input_shape) * layout.element_size;
    const size_t output_bytes = count_of(layout.output_shape) * layout.element_size;
    std::vector<uint8_t> input(input_bytes), output(output_bytes);
    for (auto& byte : input) {
        byte = static_cast<uint8_t>(rng());
    }
    for (auto& byte : output) {
        byte = static_cast<uint8_t>(rng());
    }
    std::vector<uint8_t> expected = output;
    reference(expected, input, layout, movements);
    const MoveDataArguments arguments = move_data_arguments(result.classes, input.data(), output.data(),
                                                            plan.input_row_stride(), plan.output_row_stride());
    emulate(result.table, arguments, result.classes, narrow_offsets(result.summary.span));
    EXPECT_EQ(std::memcmp(output.data(), expected.data(), output_bytes), 0);
}

}  // namespace

TEST(GpuMoveTableParts, OnlyLongListsOnSeveralThreadsAreSplit) {
    EXPECT_EQ(move_table_part_count(0, 8), 1u);
    EXPECT_EQ(move_table_part_count(2 * min_movements_per_table_part - 1, 8), 1u);
    EXPECT_EQ(move_table_part_count(size_t(1) << 24, 1), 1u) << "one thread: no parts";
    EXPECT_EQ(move_table_part_count(2 * min_movements_per_table_part, 8), 2u) << "parts of at least the minimum";
    EXPECT_EQ(move_table_part_count(100000, 2), 2 * table_parts_per_thread);
    EXPECT_EQ(move_table_part_count(size_t(1) << 30, 1024), max_table_parts);
}

TEST(GpuMoveTableParts, EveryThreadGetsAsManyParts) {
    // 10^5 movements hold 24 parts of the minimum: on 16 threads, 16 parts
    // (one each), not 24 (two for half of the threads)
    EXPECT_EQ(move_table_part_count(100000, 16), 16u);
    EXPECT_EQ(move_table_part_count(100000, 8), 16u);
    EXPECT_EQ(move_table_part_count(100000, 32), 24u) << "fewer parts than threads: one each at most";
    for (size_t threads = 2; threads <= 64; threads++) {
        for (size_t movements : {size_t(8192), size_t(20000), size_t(100000), size_t(1000000)}) {
            const size_t parts = move_table_part_count(movements, threads);
            SCOPED_TRACE(::testing::Message() << movements << " movements on " << threads << " threads");
            EXPECT_LE(parts, max_table_parts);
            EXPECT_GE(movements / parts, min_movements_per_table_part);
            if (parts > threads) {
                EXPECT_EQ(parts % threads, 0u) << parts << " parts";
            }
        }
    }
}

TEST(GpuMoveTableParts, ScatteredMixedLengthsGiveTheTableOfOneThread) {
    std::mt19937_64 rng(3);
    const Layout layout = {{40000, 2, 24}, {40000, 2, 40}, 8};
    const auto movements = random_movements(rng, layout, 40000, false);
    const BackwardsTasks backwards;
    for (size_t parts : {size_t(1), size_t(2), size_t(3), size_t(7)}) {
        SCOPED_TRACE(::testing::Message() << parts << " parts");
        check_parts(layout, movements, backwards, parts, /*runs_cross_boundaries=*/false, rng);
    }
    check_parts(layout, movements, cpu::pool_host_tasks(), 4, false, rng);
}

TEST(GpuMoveTableParts, RunsCrossingABoundaryAreCutThere) {
    // in-order whole rows: one run, collapsed into large blocks and cut
    // into entries of at most max_entry_bytes, in each part; and runs of
    // 1-3 movements, some of which a boundary cuts
    std::mt19937_64 rng(5);
    const BackwardsTasks backwards;
    {
        const Layout layout = {{50000, 16}, {50000, 16}, 4};
        std::vector<mts_data_movement_t> movements;
        for (uintptr_t i = 0; i < 50000; i++) {
            movements.push_back({i, i, 0, 0, 16});
        }
        check_parts(layout, movements, backwards, 5, true, rng);
    }
    {
        // output samples in order (each written once), input samples and
        // property ranges continuing for 1-3 movements, then jumping
        const Layout layout = {{3000, 3, 12}, {36000, 3, 20}, 4};
        std::vector<mts_data_movement_t> movements;
        while (movements.size() < 36000) {
            const uintptr_t length = 1 + rng() % 12;
            const uintptr_t start_in = rng() % (12 - length + 1);
            const uintptr_t start_out = rng() % (20 - length + 1);
            const uintptr_t first_in = rng() % (3000 - 3);
            for (uintptr_t k = 0, n = 1 + rng() % 3; k < n && movements.size() < 36000; k++) {
                movements.push_back({first_in + k, movements.size(), start_in, start_out, length});
            }
        }
        check_parts(layout, movements, backwards, 6, true, rng);
        check_parts(layout, movements, cpu::pool_host_tasks(), 6, true, rng);
    }
}

TEST(GpuMoveTableParts, LongRowsAreCutIntoSeveralEntriesPerMovement) {
    // rows of 20 KiB: two entries per movement, more than a part's room
    std::mt19937_64 rng(7);
    const Layout layout = {{40, 5120}, {40, 5200}, 4};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 40; i++) {
        movements.push_back({i, 39 - i, 0, 80, 5120});
    }
    const BackwardsTasks backwards;
    check_parts(layout, movements, backwards, 4, false, rng);
}

TEST(GpuMoveTableParts, ABadMovementInAnyPartRefusesTheList) {
    const Layout layout = {{40000, 16}, {40000, 16}, 8};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 40000; i++) {
        movements.push_back({i, (i * 7919) % 40000, 0, 0, 16});
    }
    const BackwardsTasks backwards;
    for (size_t bad : {size_t(0), size_t(9999), size_t(10000), size_t(25000), size_t(39999)}) {
        SCOPED_TRACE(::testing::Message() << "bad movement " << bad);
        std::vector<mts_data_movement_t> list = movements;
        list[bad].properties_length = 17;  // one past the properties
        const MovePlan plan(layout.output_shape, layout.input_shape, 8, list.data(), list.size());
        VectorStorage storage(16);
        std::memset(storage.data(), 0xab, 16 * sizeof(MoveTableEntry));
        MoveTableSummary summary;
        MoveLaunchClasses classes;
        EXPECT_FALSE(build_move_table_in_parts(plan, storage, summary, classes, threads_per_block, max_blocks,
                                               backwards, 4, 4));
        EXPECT_EQ(storage.capacity(), 16u) << "nothing written: the table did not grow";
        for (size_t i = 0; i < 16; i++) {
            EXPECT_EQ(storage.data()[i].input, 0xababababababababu) << "entry " << i;
        }
        EXPECT_FALSE(build_move_table_in_parts(plan, storage, summary, classes, threads_per_block, max_blocks,
                                               cpu::pool_host_tasks(), 2, 4));
    }
}

TEST(GpuMoveTableParts, EmptyMovementsAndRowsGiveNoEntry) {
    const Layout layout = {{40000, 0, 16}, {40000, 0, 16}, 8};  // no row to copy
    std::vector<mts_data_movement_t> movements(40000, mts_data_movement_t{1, 2, 0, 0, 16});
    const BackwardsTasks backwards;
    const MovePlan plan(layout.output_shape, layout.input_shape, 8, movements.data(), movements.size());
    PartsResult result = build_in_parts(plan, backwards, 4);
    EXPECT_TRUE(result.valid);
    EXPECT_EQ(result.summary.entries, 0u);
    EXPECT_EQ(result.classes.count, 0u);
    EXPECT_EQ(result.classes.blocks, 0u);

    const Layout rows = {{40000, 16}, {40000, 16}, 8};
    std::vector<mts_data_movement_t> empty(40000, mts_data_movement_t{1, 2, 3, 4, 0});  // length 0
    const MovePlan nothing(rows.output_shape, rows.input_shape, 8, empty.data(), empty.size());
    result = build_in_parts(nothing, backwards, 4);
    EXPECT_TRUE(result.valid);
    EXPECT_EQ(result.summary.entries, 0u);
}

TEST(GpuMoveTableParts, ATableOfFewerPartsAfterAnotherKeepsNothingOfIt) {
    // the part tables are kept from call to call: a shorter list after a
    // long one must not see the long one's entries
    std::mt19937_64 rng(9);
    const BackwardsTasks backwards;
    const Layout layout = {{60000, 8}, {60000, 8}, 4};
    const auto many = random_movements(rng, layout, 60000, false);
    check_parts(layout, many, backwards, 8, false, rng);
    const std::vector<mts_data_movement_t> few(many.begin(), many.begin() + 33000);
    check_parts(layout, few, backwards, 2, false, rng);
}

// A reusable plan's table is built with its copy of the movements in the
// same pass (build_move_table_copying, and the parts' copies): the very
// table of the build without a copy, the copy holding each movement, and
// the samples reached; on one thread and in parts, with rows and without
// (an empty component axis), and a bad movement still refuses the list.
TEST(GpuMoveTableParts, TheBuildThatCopiesKeepsEveryMovementAndTheSamplesReached) {
    std::mt19937_64 rng(11);
    const BackwardsTasks backwards;
    auto expected_reach = [](const std::vector<mts_data_movement_t>& movements) {
        SampleReach reach;
        for (const auto& movement : movements) {
            reach.input_samples = std::max(reach.input_samples, movement.sample_in + 1);
            reach.output_samples = std::max(reach.output_samples, movement.sample_out + 1);
        }
        return reach;
    };
    for (const Layout& layout : {Layout{{30000, 3, 24}, {20000, 3, 40}, 8}, Layout{{30000, 0, 24}, {20000, 0, 40}, 8}}) {
        SCOPED_TRACE(::testing::Message() << "components " << layout.input_shape[1]);
        const auto movements = random_movements(rng, layout, 20000, false);
        const MovePlan plan(layout.output_shape, layout.input_shape, layout.element_size, movements.data(),
                            movements.size());
        const SampleReach reach_expected = expected_reach(movements);
        auto same_copy = [&](const std::vector<mts_data_movement_t>& copy) {
            return std::memcmp(copy.data(), movements.data(), movements.size() * sizeof(mts_data_movement_t)) == 0;
        };

        // one thread
        VectorStorage plain(8);
        VectorStorage copying(8);
        MoveTableSummary plain_summary;
        MoveTableSummary copying_summary;
        std::vector<mts_data_movement_t> copy(movements.size());
        SampleReach reach;
        ASSERT_TRUE(build_move_table(plan, plain, plain_summary));
        ASSERT_TRUE(build_move_table_copying(plan, copying, copying_summary, copy.data(), reach));
        ASSERT_EQ(copying_summary.entries, plain_summary.entries);
        EXPECT_EQ(std::memcmp(copying.data(), plain.data(), plain_summary.entries * sizeof(MoveTableEntry)), 0);
        EXPECT_TRUE(same_copy(copy));
        EXPECT_EQ(reach.input_samples, reach_expected.input_samples);
        EXPECT_EQ(reach.output_samples, reach_expected.output_samples);

        // in parts, in any order
        for (size_t parts : {size_t(1), size_t(3), size_t(7)}) {
            SCOPED_TRACE(::testing::Message() << parts << " parts");
            const PartsResult expected = build_in_parts(plan, backwards, parts);
            VectorStorage storage(8);
            PartsResult result;
            std::vector<mts_data_movement_t> part_copy(movements.size());
            SampleReach part_reach;
            result.valid = build_move_table_in_parts(plan, storage, result.summary, result.classes,
                                                     threads_per_block, max_blocks, backwards, backwards.threads(),
                                                     parts, part_copy.data(), &part_reach);
            ASSERT_TRUE(result.valid);
            ASSERT_EQ(result.summary.entries, expected.summary.entries);
            // (no entry at all without a component: memcmp may not be given
            // the null data of an empty vector)
            EXPECT_TRUE(expected.table.empty() || std::memcmp(storage.data(), expected.table.data(),
                                                              expected.table.size() * sizeof(MoveTableEntry)) == 0);
            EXPECT_TRUE(same_copy(part_copy));
            EXPECT_EQ(part_reach.input_samples, reach_expected.input_samples);
            EXPECT_EQ(part_reach.output_samples, reach_expected.output_samples);
        }

        // a bad movement, in the last part
        std::vector<mts_data_movement_t> bad = movements;
        bad[bad.size() - 10].sample_in = layout.input_shape[0];
        const MovePlan bad_plan(layout.output_shape, layout.input_shape, layout.element_size, bad.data(), bad.size());
        std::vector<mts_data_movement_t> bad_copy(bad.size());
        SampleReach bad_reach;
        VectorStorage bad_storage(8);
        MoveTableSummary bad_summary;
        EXPECT_FALSE(build_move_table_copying(bad_plan, bad_storage, bad_summary, bad_copy.data(), bad_reach));
        MoveLaunchClasses classes;
        EXPECT_FALSE(build_move_table_in_parts(bad_plan, bad_storage, bad_summary, classes, threads_per_block,
                                               max_blocks, backwards, backwards.threads(), 4, bad_copy.data(),
                                               &bad_reach));
    }
}
