#pragma once
// A reusable movement plan on host memory: the movements checked once, and
// how to copy them (the runs, the single-run fast path, the thread split)
// decided once; each execution is the copy alone.

#include <cstddef>

#include "base/move_plan.hpp"
#include "cpu/move_data.hpp"

namespace mtsarray::detail::cpu {

class HostMovePlan final : public BackendMovePlan {
public:
    /// Checks every movement of `plan` (the caller's list), reading each
    /// once into `copy` (movements_count() entries, owned by the caller and
    /// kept alive, unchanged, as long as this object); throws the error
    /// naming the first bad movement. Then decides how to copy them.
    HostMovePlan(const MovePlan& plan, mts_data_movement_t* copy)
        : plan_(plan.with_movements(copy)), checked_(plan_checked_copy(plan_, check_into(plan, copy))) {}

    /// move_data() of the checked movements from `input` to `output` (the
    /// first element of each array, with the component axes and properties
    /// of the plan, and enough samples for every movement). Thread-safe: the
    /// object is not changed.
    void execute(void* output, const void* input) const { move_checked(output, input, plan_, checked_); }

    const MoveSummary& summary() const noexcept { return checked_.summary; }
    /// How execute() copies (for the tests).
    const CheckedMoves& checked() const noexcept { return checked_; }

private:
    MovePlan plan_;
    CheckedMoves checked_;
};

}  // namespace mtsarray::detail::cpu
