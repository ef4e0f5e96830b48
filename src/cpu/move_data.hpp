#pragma once
// move_data on host memory: the copy of a validated MovePlan, on the calling
// thread or split between pool threads.

#include <cstddef>
#include <vector>

#include "base/move_plan.hpp"

namespace mtsarray::detail::cpu {

/// move_data on host memory: reads every movement of `plan` once, into a
/// copy of its own (registers, for one movement), checking it (throwing
/// validate()'s error before anything is written), then works from that
/// copy only; asks how many threads the copy may use, then copies the runs
/// of `plan` from `input` to `output` (each array's first element). The
/// bytes written are those of the serial copy, whatever the thread count:
/// the copy is split only when no two movements write the same output
/// sample (the CPU's rule that the last of such movements wins then holds
/// trivially); otherwise it runs on the calling thread. Small calls are
/// mostly its fixed cost: one movement takes a short path of its own.
void move_data(void* output, const void* input, const MovePlan& plan);

/// How move_data() splits a plan (exposed for the tests).
enum class MoveDataSplit {
    serial,           // one thread asked for, or movements that may write the same bytes
    movement_blocks,  // many movements: blocks of consecutive movements
    byte_pieces,      // few long movements: their bytes end to end, cut in equal pieces
};
MoveDataSplit choose_split(const MovePlan& plan, const MoveSummary& summary, size_t threads);

// ---- movements checked once, copied many times (cpu/host_move_plan.hpp) ------

/// Checks every movement of `plan` (the caller's list), reading each once
/// and storing it into `copy` (movements_count() entries): the summary and
/// the check are those of the copy. Throws validate()'s error naming the
/// first bad movement. On several threads for long lists, like move_data().
MoveSummary check_into(const MovePlan& plan, mts_data_movement_t* copy);

using detail::SampleReach;  // base/move_plan.hpp

/// Copies `count` movements from `from` into `copy`, reading each once, and
/// gives the samples they reach; checks nothing. On several threads for
/// long lists, like check_into(). `copy` may be `from` (the reach alone).
SampleReach copy_movements(const mts_data_movement_t* from, mts_data_movement_t* copy, size_t count);

/// How move_data() would copy movements checked by check_into(), decided
/// once for a plan that is executed many times.
struct CheckedMoves {
    MoveSummary summary = {0, true, false};
    /// Consecutive movements merge into runs (in-order samples).
    bool merge = false;
    /// No two movements write the same output sample: any thread split
    /// gives the serial bytes.
    bool disjoint = false;
    /// threads_for(summary.bytes) when decided, and the split for it.
    size_t threads = 1;
    MoveDataSplit split = MoveDataSplit::serial;
    /// The coalesced runs, stored when the copy goes through them (a
    /// merged serial copy, byte pieces); `has_runs` tells an empty list
    /// from one not stored.
    bool has_runs = false;
    std::vector<MoveRun> runs;
    /// When every movement has the ranges of the first one (and there are
    /// more than a few): their (sample_in, sample_out) pairs, which the copy
    /// reads instead of the 40-byte movements, as move_data does for such a
    /// list. Empty otherwise.
    std::vector<uint64_t> shared_samples;
};

/// Decides how to copy `plan`, whose movements check_into() checked (the
/// plan on the copy, `with_movements`), with `summary` its result.
CheckedMoves plan_checked_copy(const MovePlan& plan, const MoveSummary& summary);

/// move_data() of `plan` (on movements checked by check_into()) as
/// `checked` says, without checking a movement again: from `input` to
/// `output`, any arrays with the strides of `plan` (their sample counts may
/// differ: every movement must fit them, which the caller made sure of).
/// The thread split is the one decided, unless the thread count has
/// changed since; the bytes written are those of move_data().
void move_checked(void* output, const void* input, const MovePlan& plan, const CheckedMoves& checked);

/// Copies `rows` rows of `bytes` bytes, row r from source + r *
/// input_row_stride to destination + r * output_row_stride.
using RowsCopy = void (*)(unsigned char* destination, const unsigned char* source, uint64_t bytes, uint64_t rows,
                          uint64_t output_row_stride, uint64_t input_row_stride);
/// The RowsCopy for rows of `bytes` bytes: fixed-size code for the common
/// widths (chosen once for a plan of one run, whose whole copy it is).
RowsCopy rows_copy_for(uint64_t bytes) noexcept;

}  // namespace mtsarray::detail::cpu
