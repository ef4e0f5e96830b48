#pragma once
// move_data on host memory: the copy of a validated MovePlan, on the calling
// thread or split between pool threads.

#include <cstddef>

#include "base/move_plan.hpp"

namespace mtsarray::detail::cpu {

/// move_data on host memory: reads every movement of `plan` once, into a
/// copy of its own, checking it (throwing validate()'s error before
/// anything is written), then works from that copy only; asks how many threads
/// the copy may use, then copies the runs of `plan` from `input` to
/// `output` (each array's first element). The bytes written are those of
/// the serial copy, whatever the thread count: the copy is split only when
/// no two movements write the same output sample (the CPU's rule that the
/// last of such movements wins then holds trivially); otherwise it runs on
/// the calling thread. One function for the whole call: small calls are
/// mostly this fixed cost.
void move_data(void* output, const void* input, const MovePlan& plan);

/// How move_data() splits a plan (exposed for the tests).
enum class MoveDataSplit {
    serial,           // one thread asked for, or movements that may write the same bytes
    movement_blocks,  // many movements: blocks of consecutive movements
    byte_pieces,      // few long movements: their bytes end to end, cut in equal pieces
};
MoveDataSplit choose_split(const MovePlan& plan, const MoveSummary& summary, size_t threads);

}  // namespace mtsarray::detail::cpu
