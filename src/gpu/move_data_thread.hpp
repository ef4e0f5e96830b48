#pragma once
// The work of one thread of the move_data kernel (gpu/move_data.hpp),
// written as a function of its thread index so that it also runs on the
// host: the unit tests run it for every thread of a grid, one after the
// other, and compare the result with a reference (it needs no
// synchronisation between threads: each output byte has one writer).
//
// Work split. Threads form teams of 2^team_log2 consecutive threads (1 to
// 32, within one warp); team t takes entries t, t + teams, t + 2 teams, ...
// of the table (move_data_table.hpp), prefetching its next entry while it
// copies the current one. Within an entry:
//  - rows of at least as many units as the team has threads: the threads
//    sweep each row, four units in flight per thread, consecutive threads on
//    consecutive units (coalesced, 16-byte accesses when the plan allows);
//  - shorter rows (64-byte segments, xyz components): the team covers
//    several rows at once, thread k on unit k % units of row k / units.
// The host picks the team size from the plan (team_log2_for), so that a team
// matches the typical entry: no lane sits idle on small segments, and a long
// row keeps a whole warp busy. There is no search and no division per unit.

#include <cstddef>
#include <cstdint>

#include "gpu/host_device.hpp"
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
    uint64_t entry_count;
    uint32_t team_log2;
};

/// Copies one entry with a team of `team_size` threads; this thread is
/// `lane` in the team.
template <size_t Width>
MTSARRAY_HOST_DEVICE inline void move_entry(const MoveTableEntry& entry, const MoveDataArguments& arguments,
                                            uint32_t lane, uint32_t team_size) {
    using Unit = unit_t<Width>;
    const uint32_t units = entry_row_bytes(entry) / static_cast<uint32_t>(Width);
    const uint32_t rows = entry_rows(entry);
    const unsigned char* input = arguments.input + entry_input_offset(entry);
    unsigned char* output = arguments.output + entry_output_offset(entry);

    if (units >= team_size) {
        for (uint32_t row = 0; row < rows; row++) {
            const Unit* source = reinterpret_cast<const Unit*>(input + row * arguments.input_row_stride);
            Unit* destination = reinterpret_cast<Unit*>(output + row * arguments.output_row_stride);
            uint32_t unit = lane;
            // four independent loads in flight before the stores
            for (; unit + 3 * team_size < units; unit += 4 * team_size) {
                const Unit a = source[unit];
                const Unit b = source[unit + team_size];
                const Unit c = source[unit + 2 * team_size];
                const Unit d = source[unit + 3 * team_size];
                destination[unit] = a;
                destination[unit + team_size] = b;
                destination[unit + 2 * team_size] = c;
                destination[unit + 3 * team_size] = d;
            }
            for (; unit < units; unit += team_size) {
                destination[unit] = source[unit];
            }
        }
        return;
    }

    // short rows: the team covers rows_per_step rows at a time
    const uint32_t rows_per_step = team_size / units;
    const uint32_t first_row = lane / units;
    if (first_row >= rows_per_step) {
        return;  // the lanes past the last whole row of the team
    }
    const uint32_t unit = lane - first_row * units;
    uint32_t row = first_row;
    for (; row + rows_per_step < rows; row += 2 * rows_per_step) {
        const uint32_t next = row + rows_per_step;
        const Unit a = reinterpret_cast<const Unit*>(input + row * arguments.input_row_stride)[unit];
        const Unit b = reinterpret_cast<const Unit*>(input + next * arguments.input_row_stride)[unit];
        reinterpret_cast<Unit*>(output + row * arguments.output_row_stride)[unit] = a;
        reinterpret_cast<Unit*>(output + next * arguments.output_row_stride)[unit] = b;
    }
    if (row < rows) {
        reinterpret_cast<Unit*>(output + row * arguments.output_row_stride)[unit] =
            reinterpret_cast<const Unit*>(input + row * arguments.input_row_stride)[unit];
    }
}

/// Everything thread `thread` of `threads` (a multiple of the team size)
/// does for a table of arguments.entry_count entries.
template <size_t Width>
MTSARRAY_HOST_DEVICE inline void move_data_thread(const MoveTableEntry* entries, const MoveDataArguments& arguments,
                                                  uint64_t thread, uint64_t threads) {
    const uint32_t team_size = uint32_t(1) << arguments.team_log2;
    const uint32_t lane = static_cast<uint32_t>(thread) & (team_size - 1);
    const uint64_t teams = threads >> arguments.team_log2;
    uint64_t index = thread >> arguments.team_log2;
    if (index >= arguments.entry_count) {
        return;
    }
    MoveTableEntry current = entries[index];
    while (true) {
        const uint64_t next_index = index + teams;
        const bool more = next_index < arguments.entry_count;
        MoveTableEntry next = current;
        if (more) {
            next = entries[next_index];  // in flight while this entry copies
        }
        move_entry<Width>(current, arguments, lane, team_size);
        if (!more) {
            return;
        }
        current = next;
        index = next_index;
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
