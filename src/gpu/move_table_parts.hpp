#pragma once
// The table of a long move_data built in parts on several host threads
// (HostTasks, the library's thread pool): the host work of a GPU move_data
// grows with its movements, and on a long list it is most of the call's
// latency.
//
// Two rounds of tasks. First each part of the movements is checked and made
// into its own table (build_move_table on that slice of the plan), in
// memory of its own that the calling thread keeps from call to call. Then,
// from the entries of each key that every part counted, each part knows
// where its entries go in the table sorted by class key (what
// classify_move_table_into gives), and copies them there: the sort of a
// table that mixes classes costs no pass of its own, and a table of one key
// is a copy of each part.
//
// The table is the one build_move_table and classify_move_table_into give,
// but for runs that continue across the boundary between two parts: such
// a run is two entries, one per part (each moves its own rows).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/host_tasks.hpp"
#include "base/move_plan.hpp"
#include "gpu/move_data_table.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Movements a part checks at least: below twice this, a table is built on
/// the calling thread. A part of 4096 movements is 15-35 us of work (4-9 ns
/// a movement), several times what waking a pool thread costs; larger
/// parts left most threads of a 16-core host idle on 10^5 movements (6
/// parts of 16384: 2.9x one thread).
constexpr size_t min_movements_per_table_part = size_t(1) << 12;
/// Parts per thread when the list is long enough (a thread slowed down
/// leaves its later parts to the others), and parts in all.
constexpr size_t table_parts_per_thread = 2;
constexpr size_t max_table_parts = 32;

/// The parts to build a table of `movements` movements in, on up to
/// `threads` threads: 1 (build_move_table on the calling thread) for short
/// lists or one thread. Every thread gets as many parts as the others: two
/// each when every part still has the minimum and the cap allows, else one
/// each, else fewer parts than threads. (24 parts on 16 threads had 8
/// threads build two parts while the others waited: the first round took
/// the time of two parts for 1.5 parts of work, 98 us for 10^5 movements on
/// the 16-core host of an H100.)
inline size_t move_table_part_count(size_t movements, size_t threads) {
    if (threads <= 1 || movements < 2 * min_movements_per_table_part) {
        return 1;
    }
    const size_t whole = movements / min_movements_per_table_part;  // parts of at least the minimum
    if (whole >= threads * table_parts_per_thread && threads * table_parts_per_thread <= max_table_parts) {
        return threads * table_parts_per_thread;
    }
    return std::min({whole, threads, max_table_parts});
}

/// One part's table, in memory of its own (the Storage of build_move_table).
struct MoveTablePart {
    std::vector<MoveTableEntry> entries;
    MoveTableSummary summary;
    SampleReach reach;  // of the part's movements, when they are copied
    bool valid = false;

    MoveTableEntry* data() noexcept { return entries.data(); }
    size_t capacity() const noexcept { return entries.size(); }
    void grow(size_t at_least) { entries.resize(std::max(at_least, 2 * entries.size())); }
};

/// The calling thread's part tables, reused from call to call (at least
/// `count` of them; a table of 10^6 entries would otherwise be allocated,
/// and faulted in, at every call); more than 16 MiB in all is not kept.
inline std::vector<MoveTablePart>& move_table_parts(size_t count) {
    thread_local std::vector<MoveTablePart> parts;
    size_t kept = 0;
    for (const MoveTablePart& part : parts) {
        kept += part.entries.capacity();
    }
    if (kept > (size_t(1) << 20)) {
        parts.clear();
    }
    if (parts.size() < count) {
        parts.resize(count);
    }
    return parts;
}

/// The first round of build_move_table_in_parts: part p of `parts` (its
/// slice of the movements) checked and made into tables[p], on `threads`
/// threads of `tasks`; with a `copy`, each part also stores its movements
/// there and gathers the samples they reach (build_move_table_copying).
/// tables[p].valid says whether its movements are all valid.
inline void build_move_table_parts(const MovePlan& plan, std::vector<MoveTablePart>& tables, size_t parts,
                                   const HostTasks& tasks, size_t threads, mts_data_movement_t* copy = nullptr) {
    const size_t count = plan.movements_count();
    auto build_part = [&](size_t part) {
        const size_t begin = count * part / parts;
        const size_t end = count * (part + 1) / parts;
        MoveTablePart& table = tables[part];
        if (copy != nullptr) {
            table.valid = build_move_table_copying(plan.slice(begin, end), table, table.summary, copy + begin,
                                                   table.reach);
        } else {
            table.valid = build_move_table(plan.slice(begin, end), table, table.summary);
        }
    };
    tasks.run_each(parts, threads, build_part);
}

/// Builds the table of `plan` into `storage` (the Storage of
/// build_move_table) in `parts` parts on `threads` threads of `tasks`,
/// sorted by class key, and gives its summary and the classes of its
/// launch (as classify_move_table_into does, for blocks of
/// `threads_per_block` threads and at most `max_blocks` blocks). Returns
/// false when a movement is invalid: call plan.validate() for the error
/// (nothing is written into `storage` then). `parts` >= 1. With a `copy`
/// (movements_count() entries), each part also stores its movements there
/// as it reads them, and `reach` gets the samples they reach
/// (build_move_table_copying).
template <class Storage>
bool build_move_table_in_parts(const MovePlan& plan, Storage& storage, MoveTableSummary& summary,
                               MoveLaunchClasses& classes, uint32_t threads_per_block, uint64_t max_blocks,
                               const HostTasks& tasks, size_t threads, size_t parts,
                               mts_data_movement_t* copy = nullptr, SampleReach* reach = nullptr) {
    std::vector<MoveTablePart>& tables = move_table_parts(parts);
    build_move_table_parts(plan, tables, parts, tasks, threads, copy);

    summary = MoveTableSummary{};
    SampleReach reached;
    for (size_t part = 0; part < parts; part++) {
        const MoveTableSummary& own = tables[part].summary;
        if (!tables[part].valid) {
            return false;
        }
        if (copy != nullptr) {
            reached.input_samples = std::max(reached.input_samples, tables[part].reach.input_samples);
            reached.output_samples = std::max(reached.output_samples, tables[part].reach.output_samples);
        }
        summary.entries += own.entries;
        for (uint32_t key = 0; key < move_class_keys; key++) {
            summary.per_key[key] += own.per_key[key];
        }
        summary.span = std::max(summary.span, own.span);
    }
    if (reach != nullptr) {
        *reach = reached;
    }
    classes = MoveLaunchClasses{};
    if (summary.entries == 0) {
        return true;
    }

    // where each part's entries of each key go in the sorted table: after
    // those of the parts before it
    const MoveClassOrder order = order_move_classes(summary);
    std::vector<uint64_t> starts(parts * move_class_keys);
    uint64_t next[move_class_keys];
    move_key_starts(summary, order, next);
    for (size_t part = 0; part < parts; part++) {
        for (uint32_t key = 0; key < move_class_keys; key++) {
            starts[part * move_class_keys + key] = next[key];
            next[key] += tables[part].summary.per_key[key];
        }
    }
    if (storage.capacity() < summary.entries) {
        storage.grow(summary.entries);
    }
    MoveTableEntry* const table = storage.data();
    auto place_part = [&](size_t part) {
        const MoveTablePart& own = tables[part];
        uint64_t* const start = starts.data() + part * move_class_keys;
        const uint64_t entries = own.summary.entries;
        if (entries == 0) {
            return;
        }
        const uint32_t first_key = entry_class_key(own.entries[0]);
        if (own.summary.per_key[first_key] == entries) {
            std::memcpy(table + start[first_key], own.entries.data(), entries * sizeof(MoveTableEntry));
            return;
        }
        for (uint64_t i = 0; i < entries; i++) {
            const MoveTableEntry entry = own.entries[i];
            table[start[entry_class_key(entry)]++] = entry;
        }
    };
    tasks.run_each(parts, threads, place_part);
    classes = launch_move_classes(order, threads_per_block, max_blocks);
    return true;
}

}  // namespace gpu
}  // namespace mtsarray::detail
