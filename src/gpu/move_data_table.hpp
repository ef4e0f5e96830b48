#pragma once
// The table a move_data kernel reads, and the host code that builds it from a
// MovePlan. Plain C++ (no GPU compiler needed, no runtime call), shared by
// CUDA and HIP, and compiled into the tests and the benchmark's host-side
// planning row as is.
//
// One entry, 16 bytes, per piece of work:
//   input  = input byte offset (low 40 bits)  | bytes per row (high 24 bits)
//   output = output byte offset (low 40 bits) | rows          (high 24 bits)
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
// entries straight into their final (page-locked) memory.

#include <cstddef>
#include <cstdint>

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
/// Most bytes one entry copies; also bounds bytes per row and rows (both
/// must fit in 24 bits).
constexpr uint64_t max_entry_bytes = uint64_t(16) << 10;

MTSARRAY_HOST_DEVICE inline MoveTableEntry pack_entry(uint64_t input_offset, uint64_t output_offset,
                                                      uint64_t row_bytes, uint64_t rows) {
    return MoveTableEntry{input_offset | (row_bytes << move_offset_bits),
                          output_offset | (rows << move_offset_bits)};
}

MTSARRAY_HOST_DEVICE inline uint64_t entry_input_offset(const MoveTableEntry& entry) {
    return entry.input & move_offset_mask;
}
MTSARRAY_HOST_DEVICE inline uint64_t entry_output_offset(const MoveTableEntry& entry) {
    return entry.output & move_offset_mask;
}
MTSARRAY_HOST_DEVICE inline uint32_t entry_row_bytes(const MoveTableEntry& entry) {
    return static_cast<uint32_t>(entry.input >> move_offset_bits);
}
MTSARRAY_HOST_DEVICE inline uint32_t entry_rows(const MoveTableEntry& entry) {
    return static_cast<uint32_t>(entry.output >> move_offset_bits);
}

/// Largest table a kernel launch takes by value, inside its parameters
/// (gpu/move_data.hpp: they stay within 4 KiB); larger tables are
/// uploaded to device memory.
constexpr uint32_t inline_move_table_capacity = 240;

/// What a pass over the plan learned besides the entries.
struct MoveTableSummary {
    uint64_t entries = 0;
    uint64_t total_bytes = 0;
    /// OR of every offset, row length and (for multi-row entries) row
    /// stride: the widest unit dividing them all is the kernel's width.
    uint64_t alignment_bits = 0;
};

/// Builds the table of `plan` into `storage`, checking every movement as it
/// goes; returns false at the first invalid movement (then call
/// plan.validate() for the error). `Storage` provides
///   MoveTableEntry* data();  size_t capacity();
///   void grow(size_t at_least);  // keeps the entries written so far
template <class Storage>
bool build_move_table(const MovePlan& plan, Storage& storage, MoveTableSummary& summary);

/// Largest power of two, at most 16, dividing `bits` (16 for 0).
inline size_t widest_unit_for(uint64_t bits) {
    size_t width = 16;
    while (width > 1 && bits % width != 0) {
        width /= 2;
    }
    return width;
}

/// log2 of the threads that share one entry: the power of two nearest above
/// the average number of units per entry, at most a warp (32). Teams of 4
/// threads take 64-byte rows of 16-byte units, full warps take rows of 512
/// bytes and more.
inline unsigned team_log2_for(const MoveTableSummary& summary, size_t width) {
    if (summary.entries == 0) {
        return 0;
    }
    const uint64_t units_per_entry = (summary.total_bytes / width + summary.entries - 1) / summary.entries;
    unsigned log2 = 0;
    while (log2 < 5 && (uint64_t(1) << log2) < units_per_entry) {
        log2++;
    }
    return log2;
}

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
// max_entry_bytes, or a full table. Takes and returns the cursor by value,
// so that the writer's address never escapes and its fields can live in
// registers, and the run as four values (a MoveRun argument would be
// written to the stack for every run, before the test that picks this
// path).
template <class Storage>
[[gnu::noinline, gnu::cold]] TableCursor add_slowly(Storage& storage, TableCursor cursor, uint64_t input_offset,
                                                   uint64_t output_offset, uint64_t run_bytes, uint64_t run_rows,
                                                   uint64_t input_stride, uint64_t output_stride) {
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
    return cursor;
}

// The visitor of the runs. Everything it updates per run is in its own
// fields, and its address never leaves the inlined loop (the slow path takes
// the cursor by value), so that they all live in registers; the caller's
// summary is written once, at the end: a store into the table could
// otherwise alias the summary and cost a reload and a store of each field
// per run.
template <class Storage> class Writer {
public:
    Writer(Storage& storage, uint64_t input_stride, uint64_t output_stride)
        : storage_(storage), input_stride_(input_stride), output_stride_(output_stride),
          multi_row_bits_(input_stride | output_stride),
          cursor_{storage.data(), storage.data() + storage.capacity()} {}

    [[gnu::always_inline]] void operator()(const MoveRun& run) {
        const uint64_t bytes = run.bytes * run.rows;
        total_bytes_ += bytes;
        alignment_bits_ |= run.input_offset | run.output_offset | run.bytes;
        several_rows_ |= run.rows - 1;
        if (bytes <= max_entry_bytes && cursor_.next != cursor_.limit) {
            *cursor_.next++ = pack_entry(run.input_offset, run.output_offset, run.bytes, run.rows);
        } else {
            cursor_ = add_slowly(storage_, cursor_, run.input_offset, run.output_offset, run.bytes, run.rows,
                                 input_stride_, output_stride_);
        }
    }

    void finish(MoveTableSummary& summary) const {
        summary.entries = static_cast<uint64_t>(cursor_.next - storage_.data());
        summary.total_bytes = total_bytes_;
        summary.alignment_bits = alignment_bits_ | (several_rows_ != 0 ? multi_row_bits_ : 0);
    }

private:
    Storage& storage_;
    uint64_t input_stride_;
    uint64_t output_stride_;
    uint64_t multi_row_bits_;
    TableCursor cursor_;
    uint64_t total_bytes_ = 0;
    uint64_t alignment_bits_ = 0;
    uint64_t several_rows_ = 0;  // not zero: an entry has several rows, whose strides count too
};

}  // namespace move_table_detail

template <class Storage>
bool build_move_table(const MovePlan& plan, Storage& storage, MoveTableSummary& summary) {
    summary = MoveTableSummary{};
    move_table_detail::Writer<Storage> writer(storage, plan.input_row_stride(), plan.output_row_stride());
    if (!plan.for_each_valid_run(writer)) {
        return false;
    }
    writer.finish(summary);
    return true;
}

}  // namespace gpu
}  // namespace mtsarray::detail
