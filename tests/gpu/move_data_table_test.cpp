// The GPU move_data path on the CPU: the table that the host builds
// (src/gpu/move_data_table.hpp) and the kernel's per-thread work
// (src/gpu/move_data_thread.hpp), run here for every thread of the grid the
// launcher would use, one thread after the other. Each thread's writes are
// disjoint from the others', so this sequential run computes exactly what
// the kernel computes; it checks the index arithmetic against a reference
// copy on random plans, for every unit width, team size and grid size,
// without a GPU.

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
#include "gpu/vector_units.hpp"
#include "base/error.hpp"
#include "base/move_plan.hpp"
#include "support/move_table_check.hpp"

using namespace mtsarray::detail;
using namespace mtsarray::detail::gpu;
using namespace move_table_check;

namespace {

struct Built {
    std::vector<MoveTableEntry> table;
    MoveTableSummary summary;
};

Built build(const MovePlan& plan) {
    VectorStorage storage(8);  // small: the growth path is exercised too
    Built built;
    EXPECT_TRUE(build_move_table(plan, storage, built.summary));
    built.table.assign(storage.data(), storage.data() + built.summary.entries);
    return built;
}

/// Runs `movements` through the GPU path on the CPU, at the given offsets of
/// the two buffers (misaligned base addresses narrow the unit), for the
/// team size the host would pick and every other one, on the launcher's
/// grid and on a single block; compares each result with the reference.
void check_plan(const Layout& layout, const std::vector<mts_data_movement_t>& movements, std::mt19937_64& rng,
                size_t input_shift = 0, size_t output_shift = 0) {
    const size_t input_bytes = count_of(layout.input_shape) * layout.element_size;
    const size_t output_bytes = count_of(layout.output_shape) * layout.element_size;
    std::vector<uint8_t> input_storage(input_bytes + 32), output_storage(output_bytes + 32);
    for (auto& byte : input_storage) {
        byte = static_cast<uint8_t>(rng());
    }
    for (auto& byte : output_storage) {
        byte = static_cast<uint8_t>(rng());
    }
    // 16-byte aligned bases, then shifted
    auto aligned = [](std::vector<uint8_t>& storage) {
        auto address = reinterpret_cast<uintptr_t>(storage.data());
        return storage.data() + (16 - address % 16) % 16;
    };
    uint8_t* input = aligned(input_storage) + input_shift;
    uint8_t* output_base = aligned(output_storage) + output_shift;
    ASSERT_LE(input + input_bytes, input_storage.data() + input_storage.size());

    std::vector<uint8_t> input_copy(input, input + input_bytes);
    std::vector<uint8_t> expected(output_base, output_base + output_bytes);
    reference(expected, input_copy, layout, movements);

    const MovePlan plan(layout.output_shape, layout.input_shape, layout.element_size, movements.data(),
                        movements.size());
    const Built built = build(plan);
    ASSERT_EQ(built.table.size(), built.summary.entries);
    std::vector<uint8_t> original(output_base, output_base + output_bytes);
    // the launcher's grid, one block per class, and 64-bit offsets too
    for (uint64_t max_grid : {max_blocks, uint64_t(1)}) {
        for (bool narrow : {narrow_offsets(built.summary.span), false}) {
            std::memcpy(output_base, original.data(), output_bytes);
            std::vector<MoveTableEntry> table = built.table;
            std::vector<MoveTableEntry> scratch;
            const MoveLaunchClasses classes =
                classify_move_table(table.data(), built.summary, plan.input_row_stride(), plan.output_row_stride(),
                                    threads_per_block, max_grid, scratch);
            check_classes(table, classes, plan);
            const MoveDataArguments arguments = move_data_arguments(classes, input, output_base,
                                                                    plan.input_row_stride(), plan.output_row_stride());
            emulate(table, arguments, classes, narrow);
            ASSERT_EQ(std::memcmp(output_base, expected.data(), output_bytes), 0)
                << classes.count << " classes, " << classes.blocks << " blocks, " << (narrow ? "32" : "64")
                << "-bit offsets, " << movements.size() << " movements";
        }
    }
    // the input is only read
    EXPECT_EQ(std::memcmp(input, input_copy.data(), input_bytes), 0);
}

}  // namespace

TEST(GpuMoveTable, EntriesAreSixteenBytesAndRoundTrip) {
    const auto entry = pack_entry(move_offset_mask, 12345, max_entry_bytes, max_entry_bytes);
    EXPECT_EQ(entry_input_offset(entry), move_offset_mask);
    EXPECT_EQ(entry_output_offset(entry), 12345u);
    EXPECT_EQ(entry_row_bytes(entry), max_entry_bytes);
    EXPECT_EQ(entry_rows(entry), max_entry_bytes);
    static_assert(sizeof(MoveTableEntry) == 16, "");
}

TEST(GpuMoveTable, OneEntryPerRunUntilRunsAreLarge) {
    // 1000 scattered movements of 64 bytes: one 16-byte entry each
    std::mt19937_64 rng(7);
    const Layout layout = {{1000, 32}, {2000, 32}, 8};
    auto movements = random_movements(rng, layout, 1000, false);
    for (auto& m : movements) {
        m.properties_start_in = 8;
        m.properties_start_out = 16;
        m.properties_length = 8;
    }
    std::sort(movements.begin(), movements.end(), [](auto& a, auto& b) { return a.sample_out < b.sample_out; });
    std::shuffle(movements.begin(), movements.end(), rng);
    const MovePlan plan(layout.output_shape, layout.input_shape, 8, movements.data(), movements.size());
    size_t runs = 0;
    plan.for_each_run([&](const MoveRun&) { runs++; });
    const Built built = build(plan);
    EXPECT_EQ(built.summary.entries, runs);
    EXPECT_TRUE(built.summary.single_key());
    EXPECT_EQ(move_class_key(built.table[0], 256, 256), 2 * move_unit_widths + 4)
        << "64-byte rows of 16-byte units: class 2, teams of 4";
    EXPECT_EQ(move_class_shape(2).team_log2, 2u);

    // one movement of every row of a 4 MiB array: one run, cut in 16 KiB entries
    const Layout big = {{4096, 128}, {4096, 128}, 8};
    std::vector<mts_data_movement_t> all;
    for (uintptr_t i = 0; i < 4096; i++) {
        all.push_back({i, i, 0, 0, 128});
    }
    const MovePlan whole(big.output_shape, big.input_shape, 8, all.data(), all.size());
    const Built cut = build(whole);
    EXPECT_EQ(cut.summary.entries, (4096u * 128 * 8) / max_entry_bytes);
    EXPECT_EQ(move_class_key(cut.table[0], 1024, 1024), 10 * move_unit_widths + 4) << "16 KiB entries: class 10";
    EXPECT_EQ(move_class_shape(10).team_log2, 5u) << "full warps";
    EXPECT_EQ(move_class_shape(10).pieces_log2, 3u) << "in pieces of 2 KiB";
}

/// Storage that reports `capacity` entries and keeps guard entries after
/// them, to see that the writer never writes past what it was given.
class GuardedStorage {
public:
    explicit GuardedStorage(size_t capacity) { resize(capacity); }
    MoveTableEntry* data() { return entries_.data(); }
    size_t capacity() const { return capacity_; }
    void grow(size_t at_least) { resize(std::max(at_least, 2 * capacity_)); }
    bool guards_intact() const {
        for (size_t i = capacity_; i < entries_.size(); i++) {
            if (entries_[i].input != guard.input || entries_[i].output != guard.output) {
                return false;
            }
        }
        return true;
    }

private:
    static constexpr MoveTableEntry guard = {0x5a5a5a5a5a5a5a5a, 0xa5a5a5a5a5a5a5a5};
    static constexpr size_t guards = 64;
    void resize(size_t capacity) {
        capacity_ = capacity;
        entries_.resize(capacity + guards);
        for (size_t i = capacity; i < entries_.size(); i++) {
            entries_[i] = guard;
        }
    }
    std::vector<MoveTableEntry> entries_;
    size_t capacity_ = 0;
};

TEST(GpuMoveTable, ARunCutInEntriesLeavesRoomForTheRunsAfterIt) {
    // rows of 32 KiB: 16 whole rows make one run of 512 KiB, 32 entries;
    // then 200 scattered movements of 32 bytes, one entry each: more
    // entries (232) than movements (216), in a table given room for 1
    const Layout layout = {{216, 4096}, {256, 4096}, 8};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 16; i++) {
        movements.push_back({i, i, 0, 0, 4096});
    }
    for (uintptr_t k = 0; k < 200; k++) {
        movements.push_back({16 + k, 16 + (k * 7) % 240, 0, 0, 4});
    }
    const MovePlan plan(layout.output_shape, layout.input_shape, 8, movements.data(), movements.size());
    for (const size_t capacity : {size_t(1), movements.size(), size_t(232)}) {
        SCOPED_TRACE(::testing::Message() << "room for " << capacity << " entries at first");
        GuardedStorage storage(capacity);
        MoveTableSummary summary;
        ASSERT_TRUE(build_move_table(plan, storage, summary));
        EXPECT_TRUE(storage.guards_intact()) << "an entry was written past the storage's capacity";
        ASSERT_EQ(summary.entries, 232u);
        EXPECT_EQ(summary.per_key[10 * move_unit_widths + 4], 32u) << "16 KiB entries: class 10";
        EXPECT_EQ(summary.per_key[1 * move_unit_widths + 4], 200u) << "32-byte entries: class 1";
        const Built built = build(plan);
        for (size_t i = 0; i < 232; i++) {
            EXPECT_EQ(storage.data()[i].input, built.table[i].input) << "entry " << i;
            EXPECT_EQ(storage.data()[i].output, built.table[i].output) << "entry " << i;
        }
    }
    std::mt19937_64 rng(5);
    check_plan(layout, movements, rng);
}

TEST(GpuMoveTable, ABadMovementIsFoundBeforeTheTableIsUsed) {
    const Layout layout = {{4, 8}, {4, 8}, 4};
    const std::vector<mts_data_movement_t> movements = {{0, 0, 0, 0, 8}, {1, 1, 4, 0, 5}};
    const MovePlan plan(layout.output_shape, layout.input_shape, 4, movements.data(), movements.size());
    VectorStorage storage(8);
    MoveTableSummary summary;
    EXPECT_FALSE(build_move_table(plan, storage, summary));
    EXPECT_THROW(plan.validate(), Error);
}

TEST(GpuMoveTable, RandomPlansMatchTheReference) {
    std::mt19937_64 rng(20261123);
    const size_t element_sizes[] = {1, 2, 4, 8, 16};
    for (int round = 0; round < 150; round++) {
        const size_t e = element_sizes[round % 5];
        std::vector<uintptr_t> components;
        const int axes = static_cast<int>(rng() % 3);
        for (int a = 0; a < axes; a++) {
            components.push_back(1 + rng() % 3);
        }
        const uintptr_t p_in = 1 + rng() % 40;
        const uintptr_t p_out = 1 + rng() % 40;
        Layout layout;
        layout.element_size = e;
        layout.input_shape = {static_cast<uintptr_t>(1 + rng() % 30)};
        layout.output_shape = {static_cast<uintptr_t>(1 + rng() % 30)};
        for (auto c : components) {
            layout.input_shape.push_back(c);
            layout.output_shape.push_back(c);
        }
        layout.input_shape.push_back(p_in);
        layout.output_shape.push_back(p_out);
        const auto movements = random_movements(rng, layout, 1 + rng() % 40, round % 7 == 0);
        SCOPED_TRACE(::testing::Message() << "round " << round << ", element size " << e);
        check_plan(layout, movements, rng, (round % 4 == 3) ? e : 0, 0);
    }
}

TEST(GpuMoveTable, UnalignedBasesNarrowTheUnit) {
    std::mt19937_64 rng(3);
    const Layout layout = {{12, 16}, {12, 16}, 4};
    const auto movements = random_movements(rng, layout, 12, false);
    for (size_t shift : {1, 2, 4, 8}) {
        SCOPED_TRACE(::testing::Message() << "shift " << shift);
        check_plan(layout, movements, rng, shift, 16 - shift % 16);
    }
}

TEST(GpuMoveTable, EdgeCases) {
    std::mt19937_64 rng(11);
    // no movement, zero-length movements only
    check_plan({{3, 4}, {3, 4}, 8}, {}, rng);
    check_plan({{3, 4}, {3, 4}, 8}, {{0, 1, 2, 2, 0}, {2, 0, 4, 0, 0}}, rng);
    // one element
    check_plan({{1, 1}, {1, 1}, 2}, {{0, 0, 0, 0, 1}}, rng);
    // consecutive samples that coalesce, then whole rows that collapse
    check_plan({{8, 3, 5}, {9, 3, 5}, 4}, {{2, 4, 0, 0, 5}, {3, 5, 0, 0, 5}, {4, 6, 0, 0, 5}}, rng);
    // long rows cut into pieces: 3 rows of 40 KiB each
    check_plan({{3, 5120}, {3, 5120}, 8}, {{0, 2, 0, 0, 5120}, {2, 0, 0, 0, 5120}, {1, 1, 7, 9, 5000}}, rng);
    // many short rows in one run, cut by groups of rows: 10^4 x 1 element
    std::vector<mts_data_movement_t> column;
    for (uintptr_t i = 0; i < 10000; i++) {
        column.push_back({i, i, 1, 0, 1});
    }
    check_plan({{10000, 3}, {10000, 1}, 4}, column, rng);
}

TEST(GpuMoveTable, LargeScatteredPlan) {
    std::mt19937_64 rng(5);
    const Layout layout = {{3000, 3, 17}, {5000, 3, 33}, 8};
    check_plan(layout, random_movements(rng, layout, 3000, false), rng);
}

namespace {

/// The runs a visitor sees, in order.
std::vector<MoveRun> runs_of(const MovePlan& plan) {
    std::vector<MoveRun> runs;
    plan.for_each_run([&](const MoveRun& run) { runs.push_back(run); });
    return runs;
}

bool same_runs(const std::vector<MoveRun>& a, const std::vector<MoveRun>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const MoveRun& x, const MoveRun& y) {
               return x.input_offset == y.input_offset && x.output_offset == y.output_offset &&
                      x.bytes == y.bytes && x.rows == y.rows;
           });
}

}  // namespace

// build_move_table checks each movement as it comes to it: on long lists, a
// bad movement anywhere (the start, the middle, the end) must stop it after
// exactly the runs before the bad movement's, and a good list must give the
// very runs of the unchecked pass.
TEST(GpuMoveTable, LongListsStopAtTheFirstBadMovement) {
    std::mt19937_64 rng(17);
    const uintptr_t samples = 500, properties = 24;
    const std::vector<uintptr_t> shape = {samples, 2, properties};
    const size_t count = 1000;
    for (int round = 0; round < 40; round++) {
        const auto good = runs_of_samples(rng, samples, properties, count);
        const MovePlan good_plan(shape, shape, 4, good.data(), good.size());
        std::vector<MoveRun> visited;
        ASSERT_TRUE(good_plan.for_each_valid_run([&](const MoveRun& run) { visited.push_back(run); }));
        ASSERT_TRUE(same_runs(visited, runs_of(good_plan))) << "round " << round;

        const size_t places[] = {0, 1, 127, 128, 129, 255, 256, 640, count - 1, rng() % count};
        for (size_t bad : places) {
            for (int field = 0; field < 5; field++) {
                auto movements = good;
                auto& m = movements[bad];
                switch (field) {
                case 0: m.sample_in = samples; break;
                case 1: m.sample_out = samples + rng() % 3; break;
                case 2: m.properties_start_in = properties - m.properties_length + 1; break;
                case 3: m.properties_start_out = uintptr_t(-1); break;
                default: m.properties_length = properties + 1; break;
                }
                SCOPED_TRACE(::testing::Message() << "round " << round << ", bad movement " << bad << ", field "
                                                  << field);
                const MovePlan plan(shape, shape, 4, movements.data(), movements.size());
                std::vector<MoveRun> seen;
                EXPECT_FALSE(plan.for_each_valid_run([&](const MoveRun& run) { seen.push_back(run); }));
                // the runs of the movements before the bad one, but the last
                // (which the bad movement may have extended)
                auto before = runs_of(plan.slice(0, bad));
                if (!before.empty()) {
                    before.pop_back();
                }
                EXPECT_TRUE(same_runs(seen, before)) << seen.size() << " runs visited, " << before.size()
                                                     << " expected";
                VectorStorage storage(8);
                MoveTableSummary summary;
                EXPECT_FALSE(build_move_table(plan, storage, summary));
                EXPECT_THROW(plan.validate(), Error);
            }
        }
    }
}

// Fields of 2^62 and more that are in range pass the check and give the
// same runs as the unchecked pass; one past the end is still refused.
// (Their offsets are past what a table entry holds: the GPU backends refuse
// such arrays before they build the table.)
TEST(GpuMoveTable, HugeButValidFieldsTakeTheExactCheck) {
    const uintptr_t huge = uintptr_t(1) << 62;
    const std::vector<uintptr_t> input_shape = {huge + 1000, 1};
    const std::vector<uintptr_t> output_shape = {1000, 1};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 1000; i++) {
        // every third movement reads a huge sample, in every block
        movements.push_back({(i % 3 == 0) ? huge + i : i, 999 - i, 0, 0, 1});
    }
    const MovePlan plan(output_shape, input_shape, 1, movements.data(), movements.size());
    std::vector<MoveRun> visited;
    ASSERT_TRUE(plan.for_each_valid_run([&](const MoveRun& run) { visited.push_back(run); }));
    EXPECT_TRUE(same_runs(visited, runs_of(plan)));
    EXPECT_EQ(visited.size(), 1000u);
    VectorStorage storage(8);
    MoveTableSummary summary;
    EXPECT_TRUE(build_move_table(plan, storage, summary));
    EXPECT_EQ(summary.entries, 1000u);

    // one past the last sample, in the middle: out of range, found by the
    // exact check after the runs before it
    movements[500].sample_in = huge + 1000;
    const MovePlan bad(output_shape, input_shape, 1, movements.data(), movements.size());
    visited.clear();
    EXPECT_FALSE(bad.for_each_valid_run([&](const MoveRun& run) { visited.push_back(run); }));
    EXPECT_EQ(visited.size(), 499u);
    EXPECT_FALSE(build_move_table(bad, storage, summary));
}

// Long random plans: the table against the runs of the unchecked pass, and
// the key counts of the summary against the keys of the entries, with a
// storage that starts small and grows.
TEST(GpuMoveTable, LongPlansGiveTheRunsAndTheirSummary) {
    std::mt19937_64 rng(23);
    for (int round = 0; round < 30; round++) {
        const uintptr_t samples = 300 + rng() % 700, properties = 1 + rng() % 64;
        const size_t element = size_t(1) << (rng() % 4);
        const std::vector<uintptr_t> shape = {samples, 1 + rng() % 3, properties};
        const auto movements = runs_of_samples(rng, samples, properties, 100 + rng() % 3000);
        const MovePlan plan(shape, shape, element, movements.data(), movements.size());
        VectorStorage storage(8);
        MoveTableSummary summary;
        ASSERT_TRUE(build_move_table(plan, storage, summary));
        const auto runs = runs_of(plan);
        ASSERT_EQ(summary.entries, runs.size()) << "round " << round;  // runs are below 16 KiB here
        uint64_t per_key[move_class_keys] = {};
        for (size_t i = 0; i < runs.size(); i++) {
            const auto& entry = storage.data()[i];
            ASSERT_EQ(entry_input_offset(entry), runs[i].input_offset);
            ASSERT_EQ(entry_output_offset(entry), runs[i].output_offset);
            ASSERT_EQ(entry_row_bytes(entry), runs[i].bytes);
            ASSERT_EQ(entry_rows(entry), runs[i].rows);
            const uint32_t key = move_class_key(entry, plan.input_row_stride(), plan.output_row_stride());
            ASSERT_EQ(entry_class_key(entry), key);
            per_key[key]++;
        }
        for (uint32_t key = 0; key < move_class_keys; key++) {
            EXPECT_EQ(summary.per_key[key], per_key[key]) << "key " << key;
        }
    }
}

TEST(GpuMoveTable, EveryClassGivesAThreadAtMostFourUnitsPerStep) {
    for (uint32_t c = 0; c < move_size_classes; c++) {
        const MoveClassShape shape = move_class_shape(c);
        const uint64_t units = uint64_t(1) << c;  // the most an entry of class c has
        const uint64_t per_piece = (units + (uint64_t(1) << shape.pieces_log2) - 1) >> shape.pieces_log2;
        const uint64_t per_thread = (per_piece + (uint64_t(1) << shape.team_log2) - 1) >> shape.team_log2;
        EXPECT_LE(per_thread * shape.entries_per_step, 4u) << "class " << c;
        EXPECT_LE(shape.team_log2, 5u) << "teams stay within a warp";
        EXPECT_EQ(per_thread * shape.entries_per_step, 4u) << "class " << c << " fills its slots";
    }
}

TEST(GpuMoveTable, MixedLengthsAreSortedIntoClassesWithTheirOwnBlocks) {
    // 64-byte runs, 16 KiB runs and a few misaligned ones in one plan
    std::mt19937_64 rng(11);
    const Layout layout = {{600, 2048}, {1200, 4096}, 8};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 600; i++) {
        const uintptr_t length = i % 3 == 0 ? 2048 : (i % 50 == 7 ? 5 : 8);
        const uintptr_t start_in = length == 5 ? 3 : 0;
        movements.push_back({i, 2 * i, start_in, length == 2048 ? 0 : 16 * (i % 7) + 1, length});
    }
    const MovePlan plan(layout.output_shape, layout.input_shape, 8, movements.data(), movements.size());
    Built built = build(plan);
    EXPECT_FALSE(built.summary.single_key());
    std::vector<MoveTableEntry> scratch;
    const MoveLaunchClasses classes = classify_move_table(built.table.data(), built.summary, plan.input_row_stride(),
                                                          plan.output_row_stride(), threads_per_block, max_blocks,
                                                          scratch);
    check_classes(built.table, classes, plan);
    EXPECT_EQ(classes.count, 2u) << "64- and 40-byte runs of 8-byte units (class 3), 16 KiB runs (class 10)";
    EXPECT_EQ(classes.ranges[0].size_class, 3u) << "the class of the most common key first";
    EXPECT_EQ(classes.ranges[classes.count - 1].size_class, 10u);
    check_plan(layout, movements, rng);
    check_plan(layout, movements, rng, 8, 4);  // misaligned bases: narrower steps
}

TEST(GpuMoveTable, ABlockCapScalesEveryClassDownAndKeepsOneBlockEach) {
    const Layout layout = {{20000, 64}, {20000, 64}, 4};
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 20000; i++) {
        movements.push_back({i, 19999 - i, 0, 0, i % 2 == 0 ? 64u : 1u});  // classes 4 and 0
    }
    const MovePlan plan(layout.output_shape, layout.input_shape, 4, movements.data(), movements.size());
    Built built = build(plan);
    std::vector<MoveTableEntry> scratch;
    const MoveLaunchClasses capped = classify_move_table(built.table.data(), built.summary, plan.input_row_stride(),
                                                         plan.output_row_stride(), threads_per_block, 3, scratch);
    EXPECT_EQ(capped.count, 2u);
    EXPECT_LE(capped.blocks, 3u);
    check_classes(built.table, capped, plan);
    std::mt19937_64 rng(5);
    check_plan(layout, movements, rng);
}

// The class sort writes into the space it is given and the table moves
// there when most entries change places; when nearly all entries share a
// key, they stay where they are and the table does not move. Either way
// the sorted table holds the same entries, grouped by class and key.
TEST(GpuMoveTable, TheSortMovesTheTableOnlyWhenMostEntriesMove) {
    auto sorted_entries = [](const MoveTableEntry* table, size_t count) {
        std::vector<std::pair<uint64_t, uint64_t>> entries;
        for (size_t i = 0; i < count; i++) {
            entries.emplace_back(table[i].input, table[i].output);
        }
        std::sort(entries.begin(), entries.end());
        return entries;
    };
    for (const uintptr_t minority_every : {uintptr_t(2), uintptr_t(97)}) {
        SCOPED_TRACE(::testing::Message() << "one movement in " << minority_every << " of another key");
        const Layout layout = {{5000, 64}, {5000, 64}, 4};
        std::vector<mts_data_movement_t> movements;
        for (uintptr_t i = 0; i < 5000; i++) {
            // scattered outputs, so that no two movements make one run
            movements.push_back({i, (i * 7919) % 5000, 0, 0, i % minority_every == 1 ? 1u : 64u});
        }
        const MovePlan plan(layout.output_shape, layout.input_shape, 4, movements.data(), movements.size());
        const Built built = build(plan);
        ASSERT_FALSE(built.summary.single_key());
        std::vector<MoveTableEntry> table = built.table;
        std::vector<MoveTableEntry> space;
        MoveTableEntry* sorted = table.data();
        const MoveLaunchClasses classes =
            classify_move_table_into(sorted, built.summary, threads_per_block, max_blocks, [&](size_t count) {
                space.resize(count);
                return space.data();
            });
        if (minority_every == 2) {
            EXPECT_EQ(sorted, space.data()) << "half the entries move: the table is the sort's";
        } else {
            EXPECT_EQ(sorted, table.data()) << "the common key stays in place";
            EXPECT_LT(space.size(), table.size() / 8) << "only the other entries go through the space";
        }
        const std::vector<MoveTableEntry> result(sorted, sorted + built.summary.entries);
        check_classes(result, classes, plan);
        EXPECT_EQ(sorted_entries(result.data(), result.size()),
                  sorted_entries(built.table.data(), built.table.size()));
        std::mt19937_64 rng(minority_every);
        check_plan(layout, movements, rng);
    }
}
