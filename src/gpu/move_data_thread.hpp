#pragma once
// The work of one thread of the move_data kernel (gpu/move_data.hpp),
// written as a function of its block and thread index so that it also runs
// on the host: the unit tests and the simulated runtime run it for every
// thread of a grid, one after the other (it needs no synchronisation
// between threads: each output byte has one writer, and no thread reads
// what another one computed).
//
// Work split. The table is grouped by size class, each class one range of
// entries, in any order (move_data_table.hpp), and each class has its own
// range of blocks. In class c, teams of
// 2^min(c, 5) consecutive threads (within one warp) take steps of work: a
// step is 4 entries of <= 32 units, 2 entries of <= 64 units, or one piece
// of <= 128 units of a larger entry. A thread of a step:
//  1. loads the step's table entries (the same addresses for the whole
//     team: one transaction each, all in flight together);
//  2. picks the widest unit the step's entries and the two base addresses
//     allow (a misaligned movement narrows its own step only);
//  3. issues the loads of all its units of the step (at most 4), then the
//     stores; the rare units beyond (an entry that is narrower here than
//     the host assumed) go by the same load-all-then-store pattern.
// Consecutive threads take consecutive units (coalesced), multi-row
// entries are flattened (unit k of an entry: row k / row_units).
//
// Offsets are 32-bit when every offset of the launch fits (Narrow), which
// halves the address arithmetic.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpu/host_device.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Everything a move_data kernel needs besides the table.
struct MoveDataArguments {
    const unsigned char* input;
    unsigned char* output;
    uint64_t input_row_stride;   // bytes
    uint64_t output_row_stride;  // bytes
    /// The alignment bits of the two base addresses (their low 4 bits).
    uint32_t base_bits;
    uint32_t class_count;
    /// The classes, then a sentinel (first_entry: the entry count,
    /// first_block: the grid size).
    MoveClassRange classes[move_size_classes + 1];
};

namespace move_thread_detail {

/// What the copy of a step needs of MoveDataArguments, in registers (the
/// kernel never takes the address of its parameters, which would copy
/// them to local memory).
struct MoveView {
    const unsigned char* input;
    unsigned char* output;
    uint64_t input_row_stride;
    uint64_t output_row_stride;
    uint32_t base_bits;
};

/// The part of one entry a step moves, at unit width Width.
template <bool Narrow> struct StepSpan {
    using Offset = typename std::conditional<Narrow, uint32_t, uint64_t>::type;
    Offset input;   // entry offsets
    Offset output;
    uint32_t row_units;  // units per row, 0 when the entry is one row
    uint32_t begin;      // units [begin, end) of the flattened entry
    uint32_t end;
};

template <size_t Width, bool Narrow>
MTSARRAY_HOST_DEVICE inline StepSpan<Narrow> span_of(const MoveTableEntry& entry, uint32_t piece,
                                                      uint32_t pieces_log2) {
    using Offset = typename StepSpan<Narrow>::Offset;
    const uint32_t row_units = entry_row_bytes(entry) / static_cast<uint32_t>(Width);
    const uint32_t rows = entry_rows(entry);
    const uint32_t units = row_units * rows;
    const uint32_t per_piece = (units + (uint32_t(1) << pieces_log2) - 1) >> pieces_log2;
    const uint32_t begin = piece * per_piece;
    StepSpan<Narrow> span;
    span.input = static_cast<Offset>(entry_input_offset(entry));
    span.output = static_cast<Offset>(entry_output_offset(entry));
    span.row_units = rows > 1 ? row_units : 0;
    span.begin = begin < units ? begin : units;
    span.end = begin + per_piece < units ? begin + per_piece : units;
    return span;
}

/// Byte offsets of unit `unit` of `span` in the input and the output.
template <size_t Width, bool Narrow>
MTSARRAY_HOST_DEVICE inline void locate(const StepSpan<Narrow>& span, uint32_t unit, const MoveView& a,
                                        typename StepSpan<Narrow>::Offset& input,
                                        typename StepSpan<Narrow>::Offset& output) {
    using Offset = typename StepSpan<Narrow>::Offset;
    if (span.row_units == 0) {
        input = span.input + Offset(unit) * Offset(Width);
        output = span.output + Offset(unit) * Offset(Width);
        return;
    }
    const uint32_t row = unit / span.row_units;
    const uint32_t column = unit - row * span.row_units;
    input = span.input + Offset(row) * Offset(a.input_row_stride) + Offset(column) * Offset(Width);
    output = span.output + Offset(row) * Offset(a.output_row_stride) + Offset(column) * Offset(Width);
}

// Registers (sm_90 `-Xptxas -v`): the arrays of unit values and output
// offsets below are zeroed. Left unset in the slots a thread does not
// move, they would be read (by a store that does not happen) before being
// written on some path, and ptxas keeps such a register allocated from the
// kernel's entry on, through every step of every unit width: 24 registers
// more, and spills under the 64-register bound. Zeroing costs a few moves
// per step.

/// One step: `Entries` entries (`valid` of them real, also at `group` in
/// the table), `Slots` units of each per thread before any store; then
/// whatever is left, 4 units at a time, loads first.
template <size_t Width, uint32_t Entries, uint32_t Slots, bool Narrow>
MTSARRAY_HOST_DEVICE inline void move_step(const MoveTableEntry (&entries)[Entries], const MoveTableEntry* group,
                                           uint32_t valid, uint32_t piece, uint32_t pieces_log2, uint32_t lane,
                                           uint32_t team_size, const MoveView& a) {
    using Unit = unit_t<Width>;
    using Offset = typename StepSpan<Narrow>::Offset;
    Unit values[Entries][Slots] = {};
    Offset outputs[Entries][Slots] = {};
    bool active[Entries][Slots];
    bool more = false;  // some entry has units past the slots
    MTSARRAY_UNROLL
    for (uint32_t e = 0; e < Entries; e++) {
        StepSpan<Narrow> span = span_of<Width, Narrow>(entries[e], piece, pieces_log2);
        if (e >= valid) {
            span.end = 0;
        }
        uint32_t unit = span.begin + lane;
        MTSARRAY_UNROLL
        for (uint32_t s = 0; s < Slots; s++) {
            active[e][s] = unit < span.end;
            if (active[e][s]) {
                Offset input = 0;
                locate<Width, Narrow>(span, unit, a, input, outputs[e][s]);
                values[e][s] = *reinterpret_cast<const Unit*>(a.input + input);
            }
            unit += team_size;
        }
        more = more || unit < span.end;
    }
    MTSARRAY_UNROLL
    for (uint32_t e = 0; e < Entries; e++) {
        MTSARRAY_UNROLL
        for (uint32_t s = 0; s < Slots; s++) {
            if (active[e][s]) {
                *reinterpret_cast<Unit*>(a.output + outputs[e][s]) = values[e][s];
            }
        }
    }

    // Units past the step's slots: none when the entries are as wide as
    // the host assumed (their class guarantees it); otherwise 4 at a time.
    // The entries are read again from the table (the same addresses, in
    // cache) rather than kept in registers, with their spans, through the
    // loads above: that keeps the kernel within 64 registers.
    if (!more) {
        return;
    }
    for (uint32_t e = 0; e < valid; e++) {
        const StepSpan<Narrow> span = span_of<Width, Narrow>(group[e], piece, pieces_log2);
        for (uint32_t unit = span.begin + lane + Slots * team_size; unit < span.end; unit += 4 * team_size) {
            Unit more_values[4] = {};
            Offset more_outputs[4] = {};
            MTSARRAY_UNROLL
            for (uint32_t s = 0; s < 4; s++) {
                const uint32_t k = unit + s * team_size;
                if (k < span.end) {
                    Offset input = 0;
                    locate<Width, Narrow>(span, k, a, input, more_outputs[s]);
                    more_values[s] = *reinterpret_cast<const Unit*>(a.input + input);
                }
            }
            MTSARRAY_UNROLL
            for (uint32_t s = 0; s < 4; s++) {
                if (unit + s * team_size < span.end) {
                    *reinterpret_cast<Unit*>(a.output + more_outputs[s]) = more_values[s];
                }
            }
        }
    }
}

/// Every step of one class this thread's team takes.
template <uint32_t Entries, uint32_t Slots, bool Narrow>
MTSARRAY_HOST_DEVICE inline void move_class(const MoveTableEntry* table, uint64_t first, uint64_t end,
                                            uint32_t pieces_log2, uint64_t team, uint64_t teams, uint32_t lane,
                                            uint32_t team_size, const MoveView& a) {
    const uint64_t groups = (end - first + Entries - 1) / Entries;
    const uint64_t steps = groups << pieces_log2;
    const uint32_t piece_mask = (uint32_t(1) << pieces_log2) - 1;
    for (uint64_t step = team; step < steps; step += teams) {
        const uint64_t group_first = first + (step >> pieces_log2) * Entries;
        const uint32_t piece = static_cast<uint32_t>(step) & piece_mask;
        // the table loads of the step, together
        const uint32_t valid =
            end - group_first < Entries ? static_cast<uint32_t>(end - group_first) : Entries;
        MoveTableEntry entries[Entries];
        uint64_t bits = a.base_bits;
        MTSARRAY_UNROLL
        for (uint32_t e = 0; e < Entries; e++) {
            entries[e] = e < valid ? table[group_first + e] : MoveTableEntry{0, 0};
        }
        MTSARRAY_UNROLL
        for (uint32_t e = 0; e < Entries; e++) {
            bits |= entry_alignment_bits(entries[e], a.input_row_stride, a.output_row_stride);
        }
        const MoveTableEntry* group = table + group_first;
        switch (unit_width_log2(bits)) {
        case 4: move_step<16, Entries, Slots, Narrow>(entries, group, valid, piece, pieces_log2, lane, team_size, a); break;
        case 3: move_step<8, Entries, Slots, Narrow>(entries, group, valid, piece, pieces_log2, lane, team_size, a); break;
        case 2: move_step<4, Entries, Slots, Narrow>(entries, group, valid, piece, pieces_log2, lane, team_size, a); break;
        case 1: move_step<2, Entries, Slots, Narrow>(entries, group, valid, piece, pieces_log2, lane, team_size, a); break;
        default: move_step<1, Entries, Slots, Narrow>(entries, group, valid, piece, pieces_log2, lane, team_size, a); break;
        }
    }
}

}  // namespace move_thread_detail

/// Everything thread `thread` of block `block` (blocks of
/// threads_per_block threads) does for `table`.
template <bool Narrow>
MTSARRAY_HOST_DEVICE inline void move_data_thread(const MoveTableEntry* table, const MoveDataArguments& a,
                                                  uint32_t block, uint32_t thread) {
    // the block's class: an unrolled scan of the ranges (constant indices,
    // read straight from the parameters), the same for the whole block
    MoveClassRange range = a.classes[0];
    MoveClassRange next = a.classes[1];
    MTSARRAY_UNROLL
    for (uint32_t k = 1; k < move_size_classes; k++) {
        if (k < a.class_count && a.classes[k].first_block <= block) {
            range = a.classes[k];
            next = a.classes[k + 1];
        }
    }
    const MoveClassShape shape = move_class_shape(range.size_class);
    const uint32_t team_size = uint32_t(1) << shape.team_log2;
    const uint32_t lane = thread & (team_size - 1);
    const uint64_t teams_per_block = threads_per_block >> shape.team_log2;
    const uint64_t team = uint64_t(block - range.first_block) * teams_per_block + (thread >> shape.team_log2);
    const uint64_t teams = uint64_t(next.first_block - range.first_block) * teams_per_block;
    const uint64_t first = range.first_entry;
    const uint64_t end = next.first_entry;
    using namespace move_thread_detail;
    const MoveView view{a.input, a.output, a.input_row_stride, a.output_row_stride, a.base_bits};
    if (shape.entries_per_step == 4) {
        move_class<4, 1, Narrow>(table, first, end, shape.pieces_log2, team, teams, lane, team_size, view);
    } else if (shape.entries_per_step == 2) {
        move_class<2, 2, Narrow>(table, first, end, shape.pieces_log2, team, teams, lane, team_size, view);
    } else {
        move_class<1, 4, Narrow>(table, first, end, shape.pieces_log2, team, teams, lane, team_size, view);
    }
}

/// The kernel's arguments for `classes` of a table of the plan's strides,
/// moving from `input` to `output`.
inline MoveDataArguments move_data_arguments(const MoveLaunchClasses& classes, const void* input, void* output,
                                             uint64_t input_row_stride, uint64_t output_row_stride) {
    MoveDataArguments a{};
    a.input = static_cast<const unsigned char*>(input);
    a.output = static_cast<unsigned char*>(output);
    a.input_row_stride = input_row_stride;
    a.output_row_stride = output_row_stride;
    a.base_bits = static_cast<uint32_t>((reinterpret_cast<uintptr_t>(input) | reinterpret_cast<uintptr_t>(output)) &
                                        15);
    a.class_count = classes.count;
    for (uint32_t i = 0; i <= classes.count && i <= move_size_classes; i++) {
        a.classes[i] = classes.ranges[i];
    }
    return a;
}

/// Offsets of a table whose entries stay below `span` bytes fit in 32 bits.
inline bool narrow_offsets(uint64_t span) { return span <= (uint64_t(1) << 32); }

}  // namespace gpu
}  // namespace mtsarray::detail
