#pragma once
// The table a move_data kernel reads: one entry per run of a MovePlan, laid
// out so that a flat index over all the units the plan copies finds its run
// by binary search. Host-only code, shared by CUDA and HIP.
//
// Every run is `rows` rows of `bytes` bytes, i.e. rows * (bytes / width)
// units of `width` bytes. Runs are numbered one after another in that flat
// unit space; `first_unit` is the prefix sum, so the run holding unit u is the
// last entry with first_unit <= u, and within it row = (u - first_unit) /
// units_per_row.

#include <cstddef>
#include <cstdint>

#include "../move_plan.hpp"

namespace mtsarray::detail {
namespace gpu {

struct MoveTableEntry {
    uint64_t first_unit;     // units of the runs before this one
    uint64_t units_per_row;  // run.bytes / width
    uint64_t input_offset;   // bytes from the input's first element
    uint64_t output_offset;  // bytes from the output's first element
};

/// Entries the table of `plan` has (runs that copy at least one byte).
inline size_t move_table_size(const MovePlan& plan) {
    size_t size = 0;
    for (const MoveRun& run : plan.runs()) {
        if (run.bytes != 0 && run.rows != 0) {
            size++;
        }
    }
    return size;
}

/// Writes the move_table_size(plan) entries of the table for units of
/// `width` bytes (which must divide every run's byte count) to `entries`, and
/// returns the number of units the plan copies.
inline uint64_t write_move_table(const MovePlan& plan, size_t width, MoveTableEntry* entries) {
    uint64_t units = 0;
    for (const MoveRun& run : plan.runs()) {
        if (run.bytes == 0 || run.rows == 0) {
            continue;
        }
        const uint64_t units_per_row = run.bytes / width;
        *entries++ = MoveTableEntry{units, units_per_row, run.input_offset, run.output_offset};
        units += units_per_row * run.rows;
    }
    return units;
}

}  // namespace gpu
}  // namespace mtsarray::detail
