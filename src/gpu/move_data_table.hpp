#pragma once
// The table a move_data kernel reads, and the host code that builds it from a
// MovePlan. Plain C++ (no GPU compiler needed, no runtime call), shared by
// CUDA and HIP, and compiled into the tests and the benchmark's host-side
// planning row as is.
//
// One entry, 16 bytes, per piece of work:
//   input  = input byte offset (low 40 bits)  | class key (8 bits) | bytes per row (high 16 bits)
//   output = output byte offset (low 40 bits) | rows              (high 24 bits)
// Row r of an entry reads at input + input_offset + r * input_row_stride and
// writes at output + output_offset + r * output_row_stride (the plan's row
// strides, kernel arguments). Offsets below 2^40 bytes cover any array a GPU
// holds (a plan on larger arrays is refused with a clear error).
//
// Runs larger than max_entry_bytes are cut into entries of at most that many
// bytes (whole rows when rows are short, pieces of a row when a row is long),
// so that the work of one entry stays bounded whatever the plan: a team of
// threads handles one entry at a time (gpu/move_data.hpp).
//
// Building the table is the host work of every GPU move_data call, for
// every movement: one pass over the caller's movements checks each one
// (MovePlan::for_each_valid_run), coalesces it into runs and packs the
// entries straight into their final (page-locked) memory. A long list is
// built in parts on several host threads (move_table_parts.hpp).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/move_plan.hpp"
#include "gpu/host_device.hpp"

namespace mtsarray::detail {
namespace gpu {

struct MoveTableEntry {
    uint64_t input;
    uint64_t output;
};
static_assert(sizeof(MoveTableEntry) == 16, "the table costs 16 bytes per entry");

constexpr unsigned move_offset_bits = 40;
constexpr uint64_t move_offset_mask = (uint64_t(1) << move_offset_bits) - 1;
/// Largest array (in bytes) an offset of the table can address.
constexpr uint64_t max_move_array_bytes = uint64_t(1) << move_offset_bits;
/// Most bytes one entry copies; also bounds bytes per row (16 bits) and
/// rows (24 bits).
constexpr uint64_t max_entry_bytes = uint64_t(16) << 10;
/// The entry's class key (move_class_key) is in the 8 bits of its input
/// word between the offset and the bytes per row: the host's class sort
/// reads it there instead of computing it again, and the kernel reads the
/// bytes per row with one shift, as when they took all 24 bits.
constexpr unsigned move_key_shift = move_offset_bits;
constexpr unsigned move_row_bytes_shift = move_offset_bits + 8;
static_assert(max_entry_bytes < (uint64_t(1) << (64 - move_row_bytes_shift)), "bytes per row fit in 16 bits");

MTSARRAY_HOST_DEVICE inline MoveTableEntry pack_entry(uint64_t input_offset, uint64_t output_offset,
                                                      uint64_t row_bytes, uint64_t rows, uint32_t key = 0) {
    return MoveTableEntry{input_offset | (uint64_t(key) << move_key_shift) | (row_bytes << move_row_bytes_shift),
                          output_offset | (rows << move_offset_bits)};
}

MTSARRAY_HOST_DEVICE inline uint64_t entry_input_offset(const MoveTableEntry& entry) {
    return entry.input & move_offset_mask;
}
MTSARRAY_HOST_DEVICE inline uint64_t entry_output_offset(const MoveTableEntry& entry) {
    return entry.output & move_offset_mask;
}
MTSARRAY_HOST_DEVICE inline uint32_t entry_row_bytes(const MoveTableEntry& entry) {
    return static_cast<uint32_t>(entry.input >> move_row_bytes_shift);
}
/// The class key build_move_table stored (0 in an entry packed without one).
inline uint32_t entry_class_key(const MoveTableEntry& entry) {
    return static_cast<uint32_t>(entry.input >> move_key_shift) & 0xff;
}
MTSARRAY_HOST_DEVICE inline uint32_t entry_rows(const MoveTableEntry& entry) {
    return static_cast<uint32_t>(entry.output >> move_offset_bits);
}

/// Largest table a kernel launch takes by value, inside its parameters
/// (gpu/move_data.hpp: they stay within 4 KiB with the class list of
/// MoveDataArguments); larger tables are read from device memory.
constexpr uint32_t inline_move_table_capacity = 200;

// ---- size classes -----------------------------------------------------------
//
// Every entry has its own unit width, the widest power of two (at most 16)
// dividing its offsets, its row length and, when it has several rows, the
// row strides; and a size class c: its units number at most 2^c. The
// kernel sizes a team by class (move_data_thread.hpp): 2^min(c, 5) threads,
// so that a 64-byte run (4 units of 16 bytes) takes a team of 4 and a
// 16 KiB run a warp, each with no idle lane, whatever else the plan holds.
// The host groups the table by (class, width) -- done only when the plan
// mixes several -- so that each class is one contiguous range and the
// entries a team takes together share a width.

/// Size classes: entries move at most max_entry_bytes, so at most 2^14
/// units (of one byte).
constexpr uint32_t move_size_classes = 15;
constexpr uint32_t move_unit_widths = 5;  // 1, 2, 4, 8, 16 bytes
constexpr uint32_t move_class_keys = move_size_classes * move_unit_widths;

/// The bits whose alignment bounds the unit width of `entry`.
MTSARRAY_HOST_DEVICE inline uint64_t entry_alignment_bits(const MoveTableEntry& entry, uint64_t input_stride,
                                                          uint64_t output_stride) {
    uint64_t bits = entry_input_offset(entry) | entry_output_offset(entry) | entry_row_bytes(entry);
    if (entry_rows(entry) > 1) {
        bits |= input_stride | output_stride;
    }
    return bits;
}

/// log2 of the widest unit (at most 16 bytes) dividing `bits`.
MTSARRAY_HOST_DEVICE inline uint32_t unit_width_log2(uint64_t bits) {
    const uint32_t low = static_cast<uint32_t>(bits & 15);
    if (low == 0) {
        return 4;
    }
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return static_cast<uint32_t>(__ffs(static_cast<int>(low)) - 1);
#else
    return static_cast<uint32_t>(__builtin_ctz(low));
#endif
}

/// The smallest c with `units` <= 2^c.
inline uint32_t size_class_of_units(uint64_t units) {
    return units <= 1 ? 0 : static_cast<uint32_t>(64 - __builtin_clzll(units - 1));
}

/// The sort key of an entry: its size class, then its width.
inline uint32_t move_class_key(const MoveTableEntry& entry, uint64_t input_stride, uint64_t output_stride) {
    const uint32_t width_log2 = unit_width_log2(entry_alignment_bits(entry, input_stride, output_stride));
    const uint64_t bytes = uint64_t(entry_row_bytes(entry)) * entry_rows(entry);
    return size_class_of_units(bytes >> width_log2) * move_unit_widths + width_log2;
}

/// What a pass over the plan learned besides the entries.
struct MoveTableSummary {
    uint64_t entries = 0;
    /// Entries of each class key (move_class_key), counted as they are
    /// written: the class sort needs no pass of its own to count them.
    uint64_t per_key[move_class_keys] = {};
    /// Largest offset + bytes spanned by an entry, in either array: below
    /// 2^32, the kernel computes its addresses on 32 bits.
    uint64_t span = 0;

    bool single_key() const noexcept {
        unsigned keys = 0;
        for (uint64_t count : per_key) {
            keys += count != 0 ? 1 : 0;
        }
        return keys <= 1;
    }
};

/// Sets summary.entries and summary.per_key from the class keys stored in
/// `entries` (a part of a table build_move_table made).
inline void count_move_table_keys(const MoveTableEntry* entries, uint64_t count, MoveTableSummary& summary) {
    summary.entries = count;
    for (uint64_t& keys : summary.per_key) {
        keys = 0;
    }
    for (uint64_t i = 0; i < count; i++) {
        summary.per_key[entry_class_key(entries[i])]++;
    }
}

/// Builds the table of `plan` into `storage`, checking every movement as it
/// goes; returns false at the first invalid movement (then call
/// plan.validate() for the error). `Storage` provides
///   MoveTableEntry* data();  size_t capacity();
///   void grow(size_t at_least);  // keeps the entries written so far
template <class Storage>
bool build_move_table(const MovePlan& plan, Storage& storage, MoveTableSummary& summary);

/// The same, also storing each movement as it was read into copy[i] and the
/// samples they reach into `reach` (MovePlan::for_each_valid_run_copying):
/// a reusable plan's table and its copy of the movements in one pass.
template <class Storage>
bool build_move_table_copying(const MovePlan& plan, Storage& storage, MoveTableSummary& summary,
                              mts_data_movement_t* copy, SampleReach& reach);

/// Entries [first, first + count) of one size class, and the blocks of the
/// launch that take them: [first_block, next class's first_block).
struct MoveClassRange {
    uint64_t first_entry;
    uint32_t first_block;
    uint32_t size_class;
};

/// How the kernel splits a class: teams of 2^team_log2 threads take
/// `entries_per_step` entries at a time, each cut in 2^pieces_log2 pieces,
/// so that a thread has at most 4 units of each step in flight.
struct MoveClassShape {
    uint32_t team_log2;
    uint32_t entries_per_step;
    uint32_t pieces_log2;
};

MTSARRAY_HOST_DEVICE inline MoveClassShape move_class_shape(uint32_t size_class) {
    if (size_class <= 5) {
        return {size_class, 4, 0};  // one unit per thread and entry
    }
    if (size_class == 6) {
        return {5, 2, 0};  // two units per thread and entry
    }
    return {5, 1, size_class - 7};  // pieces of at most 128 units
}

/// The classes of a launch (a sentinel after the last one).
struct MoveLaunchClasses {
    uint32_t count = 0;
    uint32_t blocks = 0;
    MoveClassRange ranges[move_size_classes + 1] = {};
};

/// The order of the classes in a sorted table: the class of `dominant`
/// (the most common key) first, then the others by size; in each class,
/// `dominant` first, then the other keys by width. `per_class`: entries of
/// each class.
struct MoveClassOrder {
    uint32_t dominant;
    uint32_t classes[move_size_classes];
    uint64_t per_class[move_size_classes];
};
MoveClassOrder order_move_classes(const MoveTableSummary& summary);

/// Where the entries of each key start in a table sorted in `order`.
void move_key_starts(const MoveTableSummary& summary, const MoveClassOrder& order,
                     uint64_t (&start)[move_class_keys]);

/// The classes and blocks of a launch on a table sorted in `order`, for
/// blocks of `threads_per_block` threads and at most `max_blocks` blocks.
MoveLaunchClasses launch_move_classes(const MoveClassOrder& order, uint32_t threads_per_block,
                                      uint64_t max_blocks);

/// Sorts `table` by class key when more than one is present (the key each
/// entry holds, counted in `summary`; not stable): each class one
/// contiguous range, each key one contiguous range within it, the class of
/// the most common key first. Gives the classes and the blocks of the
/// launch, for blocks of `threads_per_block` threads and at most
/// `max_blocks` blocks. The sort writes into `sort_space(count)`, memory
/// for `count` entries apart from the table's, and leaves `table` pointing
/// to the sorted table: that memory when it was asked for the whole table
/// (count == summary.entries; most entries moved, and are not copied
/// back), or the table where it was (fewer entries, sorted in place).
template <class SortSpace>
MoveLaunchClasses classify_move_table_into(MoveTableEntry*& table, const MoveTableSummary& summary,
                                           uint32_t threads_per_block, uint64_t max_blocks, SortSpace&& sort_space);

/// The same, sorting `entries` where they are (through `scratch`, resized
/// as needed).
MoveLaunchClasses classify_move_table(MoveTableEntry* entries, const MoveTableSummary& summary,
                                      uint64_t input_stride, uint64_t output_stride, uint32_t threads_per_block,
                                      uint64_t max_blocks, std::vector<MoveTableEntry>& scratch);

// ---- implementation -------------------------------------------------------

namespace move_table_detail {

// Where the next entry goes: the next free entry of the table and the end
// of its memory.
struct TableCursor {
    MoveTableEntry* next;
    MoveTableEntry* limit;
};

// Out of the hot path, and out of line so that the hot path stays small
// enough to inline into the loop over the movements: a run of more than
// max_entry_bytes, cut into entries. It leaves room for `room` entries
// more (the runs that may come after it, one entry each on the hot path,
// which then never checks for room). Takes and returns the cursor by value,
// so that the writer's address never escapes and its fields can live in
// registers, and the run as four values (a MoveRun argument would be
// written to the stack for every run, before the test that picks this
// path).
template <class Storage>
[[gnu::noinline, gnu::cold]] TableCursor add_slowly(Storage& storage, TableCursor cursor, uint64_t input_offset,
                                                   uint64_t output_offset, uint64_t run_bytes, uint64_t run_rows,
                                                   uint64_t input_stride, uint64_t output_stride, size_t room) {
    const MoveRun run = {input_offset, output_offset, run_bytes, run_rows};
    auto add = [&](uint64_t input_offset, uint64_t output_offset, uint64_t row_bytes, uint64_t rows) {
        if (cursor.next == cursor.limit) {
            const size_t size = static_cast<size_t>(cursor.next - storage.data());
            storage.grow(size + 1);
            cursor = {storage.data() + size, storage.data() + storage.capacity()};
        }
        *cursor.next++ = pack_entry(input_offset, output_offset, row_bytes, rows);
    };
    if (run.bytes * run.rows <= max_entry_bytes) {
        add(run.input_offset, run.output_offset, run.bytes, run.rows);
    } else if (run.bytes <= max_entry_bytes) {
        // short rows: groups of whole rows
        const uint64_t rows_per_entry = max_entry_bytes / run.bytes;
        for (uint64_t row = 0; row < run.rows; row += rows_per_entry) {
            const uint64_t rows = run.rows - row < rows_per_entry ? run.rows - row : rows_per_entry;
            add(run.input_offset + row * input_stride, run.output_offset + row * output_stride, run.bytes, rows);
        }
    } else {
        // long rows: pieces of one row each
        for (uint64_t row = 0; row < run.rows; row++) {
            for (uint64_t start = 0; start < run.bytes; start += max_entry_bytes) {
                const uint64_t bytes = run.bytes - start < max_entry_bytes ? run.bytes - start : max_entry_bytes;
                add(run.input_offset + row * input_stride + start, run.output_offset + row * output_stride + start,
                    bytes, 1);
            }
        }
    }
    if (static_cast<size_t>(cursor.limit - cursor.next) < room) {
        const size_t size = static_cast<size_t>(cursor.next - storage.data());
        storage.grow(size + room);
        cursor = {storage.data() + size, storage.data() + storage.capacity()};
    }
    return cursor;
}

// The class key (move_class_key) of an entry at these offsets, of `rows`
// rows of `row_bytes` (`bytes` in all, at least 1), from the values at hand
// and without a branch.
[[gnu::always_inline]] inline uint32_t class_key_of(uint64_t input_offset, uint64_t output_offset,
                                                    uint64_t row_bytes, uint64_t rows, uint64_t bytes,
                                                    uint64_t multi_row_bits) {
    const uint64_t bits = input_offset | output_offset | row_bytes | (rows > 1 ? multi_row_bits : 0) | 16;
    const uint32_t width_log2 = static_cast<uint32_t>(__builtin_ctzll(bits));
    // the smallest c with units <= 2^c: the bit width of units - 1
    const uint64_t units = bytes >> width_log2;
    const uint32_t size_class = 63 - static_cast<uint32_t>(__builtin_clzll(((units - 1) << 1) | 1));
    return size_class * move_unit_widths + width_log2;
}

// The visitor of the runs. Everything it updates per run is in its own
// fields, and its address never leaves the inlined loop (the slow path takes
// the cursor by value), so that they all live in registers; the caller's
// summary is written once, at the end: a store into the table could
// otherwise alias the summary and cost a reload and a store of each field
// per run. The table has room for one entry per run (`runs`, at most one
// per movement) from the start, and after each run cut in several entries:
// a run of at most max_entry_bytes is written with no check for room.
template <class Storage> class Writer {
public:
    Writer(Storage& storage, uint64_t input_stride, uint64_t output_stride, uint64_t* per_key, size_t runs)
        : storage_(storage), per_key_(per_key), input_stride_(input_stride), output_stride_(output_stride),
          multi_row_bits_(input_stride | output_stride), runs_(runs) {
        if (storage.capacity() < runs) {
            storage.grow(runs);
        }
        cursor_ = {storage.data(), storage.data() + storage.capacity()};
    }

    [[gnu::always_inline]] void operator()(const MoveRun& run) {
        const uint64_t bytes = run.bytes * run.rows;
        if (bytes <= max_entry_bytes) {
            const uint32_t key =
                class_key_of(run.input_offset, run.output_offset, run.bytes, run.rows, bytes, multi_row_bits_);
            per_key_[key]++;
            *cursor_.next++ = pack_entry(run.input_offset, run.output_offset, run.bytes, run.rows, key);
        } else {
            const size_t first = static_cast<size_t>(cursor_.next - storage_.data());
            cursor_ = add_slowly(storage_, cursor_, run.input_offset, run.output_offset, run.bytes, run.rows,
                                 input_stride_, output_stride_, runs_);
            for (MoveTableEntry* entry = storage_.data() + first; entry != cursor_.next; entry++) {
                const uint32_t key = move_class_key(*entry, input_stride_, output_stride_);
                entry->input |= uint64_t(key) << move_key_shift;
                per_key_[key]++;
            }
        }
    }

    void finish(MoveTableSummary& summary) const {
        summary.entries = static_cast<uint64_t>(cursor_.next - storage_.data());
    }

private:
    Storage& storage_;
    uint64_t* per_key_;  // the summary's counts: memory either way, indexed by key
    uint64_t input_stride_;
    uint64_t output_stride_;
    uint64_t multi_row_bits_;
    size_t runs_;
    TableCursor cursor_;
};

}  // namespace move_table_detail

namespace move_table_detail {

// build_move_table's body: `pass(writer)` runs the plan's runs through the
// writer (with or without a copy of the movements).
template <class Storage, class Pass>
[[gnu::always_inline]] inline bool build_table(const MovePlan& plan, Storage& storage, MoveTableSummary& summary,
                                               Pass&& pass) {
    summary = MoveTableSummary{};
    Writer<Storage> writer(storage, plan.input_row_stride(), plan.output_row_stride(), summary.per_key,
                           plan.movements_count());
    if (!pass(writer)) {
        return false;
    }
    writer.finish(summary);
    summary.span = plan.input_bytes() > plan.output_bytes() ? plan.input_bytes() : plan.output_bytes();
    return true;
}

}  // namespace move_table_detail

template <class Storage>
bool build_move_table(const MovePlan& plan, Storage& storage, MoveTableSummary& summary) {
    return move_table_detail::build_table(plan, storage, summary,
                                          [&](auto& writer) { return plan.for_each_valid_run(writer); });
}

template <class Storage>
bool build_move_table_copying(const MovePlan& plan, Storage& storage, MoveTableSummary& summary,
                              mts_data_movement_t* copy, SampleReach& reach) {
    return move_table_detail::build_table(plan, storage, summary, [&](auto& writer) {
        return plan.for_each_valid_run_copying(writer, copy, reach);
    });
}

/// The calling thread's scratch table for classify_move_table, reused from
/// call to call (a move_data of 10^5 movements would otherwise allocate,
/// and fault in, 1.6 MB every time); one above 4 MiB is not kept.
inline std::vector<MoveTableEntry>& move_table_scratch() {
    thread_local std::vector<MoveTableEntry> scratch;
    if (scratch.capacity() > (size_t(1) << 18)) {
        scratch = std::vector<MoveTableEntry>();
    }
    return scratch;
}

namespace move_table_detail {

// Sorts a table that mixes class keys into the order of `order`
// (order_move_classes): a counting sort by the key each entry holds, into
// memory that `sort_space(count)` gives, which is where the sorted table is
// then (the pointer returned). When nearly every entry has the dominant
// key, its entries already in place (at the start) stay there: the few of
// other keys found there are swapped with entries of the dominant key from
// beyond (a branch each, rarely taken), only the entries after the
// dominant key's range go through the sort space, and the sorted table is
// `entries`.
template <class SortSpace>
MoveTableEntry* sort_move_table(MoveTableEntry* entries, const MoveTableSummary& summary,
                                const MoveClassOrder& order, SortSpace& sort_space) {
    const uint32_t dominant = order.dominant;
    const uint64_t count = summary.entries;
    const bool in_place = summary.per_key[dominant] >= count - count / 8;
    const uint64_t head = in_place ? summary.per_key[dominant] : 0;
    // the dominant key's range: each entry of another key there takes the
    // place of one of the dominant key after it
    // (screened a block at a time: one branch per block, not per entry)
    uint64_t beyond = head;
    const uint64_t dominant_bits = uint64_t(dominant) << move_key_shift;
    const uint64_t key_bits = uint64_t(0xff) << move_key_shift;
    constexpr uint64_t screened_block = 16;
    for (uint64_t first = 0; first < head; first += screened_block) {
        const uint64_t last = head - first < screened_block ? head : first + screened_block;
        uint64_t differ = 0;
        for (uint64_t i = first; i < last; i++) {
            differ |= entries[i].input ^ dominant_bits;
        }
        if ((differ & key_bits) == 0) {
            continue;
        }
        for (uint64_t i = first; i < last; i++) {
            if (entry_class_key(entries[i]) != dominant) {
                while (entry_class_key(entries[beyond]) != dominant) {
                    beyond++;
                }
                const MoveTableEntry other = entries[i];
                entries[i] = entries[beyond];
                entries[beyond++] = other;
            }
        }
    }
    // the rest, [head, count): a counting sort. In place, every entry of
    // the dominant key is in the head by now, and the dominant key comes
    // first in the order: every other key starts `head` entries earlier in
    // the sort space than in the sorted table.
    uint64_t start[move_class_keys];
    move_key_starts(summary, order, start);
    for (uint64_t& position : start) {
        position = position >= head ? position - head : 0;
    }
    const uint64_t rest = count - head;
    MoveTableEntry* const sorted = sort_space(static_cast<size_t>(rest));
    for (uint64_t i = head; i < count; i++) {
        const MoveTableEntry entry = entries[i];
        sorted[start[entry_class_key(entry)]++] = entry;
    }
    if (!in_place) {
        return sorted;
    }
    std::memcpy(entries + head, sorted, rest * sizeof(MoveTableEntry));
    return entries;
}

}  // namespace move_table_detail

inline MoveClassOrder order_move_classes(const MoveTableSummary& summary) {
    MoveClassOrder order;
    // the class of the most common key first, so that the entries of that
    // key, which are where a table starts, mostly stay where they are; then
    // the other classes (the kernel finds a block's class by its blocks, in
    // any order)
    order.dominant = 0;
    for (uint32_t key = 1; key < move_class_keys; key++) {
        order.dominant = summary.per_key[key] > summary.per_key[order.dominant] ? key : order.dominant;
    }
    const uint32_t dominant_class = order.dominant / move_unit_widths;
    order.classes[0] = dominant_class;
    for (uint32_t c = 0, next = 1; c < move_size_classes; c++) {
        if (c != dominant_class) {
            order.classes[next++] = c;
        }
    }
    for (uint64_t& count : order.per_class) {
        count = 0;
    }
    for (uint32_t key = 0; key < move_class_keys; key++) {
        order.per_class[key / move_unit_widths] += summary.per_key[key];
    }
    return order;
}

inline void move_key_starts(const MoveTableSummary& summary, const MoveClassOrder& order,
                            uint64_t (&start)[move_class_keys]) {
    uint64_t next = 0;
    start[order.dominant] = next;
    next += summary.per_key[order.dominant];
    for (const uint32_t c : order.classes) {
        for (uint32_t key = c * move_unit_widths; key < (c + 1) * move_unit_widths; key++) {
            if (key != order.dominant) {
                start[key] = next;
                next += summary.per_key[key];
            }
        }
    }
}

inline MoveLaunchClasses launch_move_classes(const MoveClassOrder& order, uint32_t threads_per_block,
                                             uint64_t max_blocks) {
    MoveLaunchClasses launch;
    // blocks per class: one step of work per team, all classes scaled down
    // together when they would exceed max_blocks
    uint64_t blocks[move_size_classes] = {};
    uint64_t total = 0;
    for (uint32_t c = 0; c < move_size_classes; c++) {
        if (order.per_class[c] == 0) {
            continue;
        }
        const MoveClassShape shape = move_class_shape(c);
        const uint64_t steps = ((order.per_class[c] + shape.entries_per_step - 1) / shape.entries_per_step)
                               << shape.pieces_log2;
        const uint64_t teams_per_block = threads_per_block >> shape.team_log2;
        blocks[c] = (steps + teams_per_block - 1) / teams_per_block;
        total += blocks[c];
    }
    uint64_t first_entry = 0;
    uint64_t first_block = 0;
    for (const uint32_t c : order.classes) {
        if (order.per_class[c] == 0) {
            continue;
        }
        uint64_t count = blocks[c];
        if (total > max_blocks) {
            count = count * max_blocks / total;
            count = count == 0 ? 1 : count;
        }
        launch.ranges[launch.count++] = {first_entry, static_cast<uint32_t>(first_block), c};
        first_entry += order.per_class[c];
        first_block += count;
    }
    launch.ranges[launch.count] = {first_entry, static_cast<uint32_t>(first_block), move_size_classes};
    launch.blocks = static_cast<uint32_t>(first_block);
    return launch;
}

template <class SortSpace>
MoveLaunchClasses classify_move_table_into(MoveTableEntry*& table, const MoveTableSummary& summary,
                                           uint32_t threads_per_block, uint64_t max_blocks, SortSpace&& sort_space) {
    if (summary.entries == 0) {
        return MoveLaunchClasses{};
    }
    const MoveClassOrder order = order_move_classes(summary);
    if (summary.per_key[order.dominant] != summary.entries) {
        table = move_table_detail::sort_move_table(table, summary, order, sort_space);
    }
    return launch_move_classes(order, threads_per_block, max_blocks);
}

inline MoveLaunchClasses classify_move_table(MoveTableEntry* entries, const MoveTableSummary& summary,
                                             uint64_t input_stride, uint64_t output_stride,
                                             uint32_t threads_per_block, uint64_t max_blocks,
                                             std::vector<MoveTableEntry>& scratch) {
    (void)input_stride;
    (void)output_stride;
    MoveTableEntry* table = entries;
    const MoveLaunchClasses launch =
        classify_move_table_into(table, summary, threads_per_block, max_blocks, [&](size_t count) {
            scratch.resize(count);
            return scratch.data();
        });
    if (table != entries) {
        std::memcpy(entries, table, summary.entries * sizeof(MoveTableEntry));
    }
    return launch;
}

}  // namespace gpu
}  // namespace mtsarray::detail
