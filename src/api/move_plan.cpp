// mtsarray_move_plan_*: movement plans made once and executed many times
// (include/mtsarray.h).

#include <memory>
#include <string>

#include "mtsarray.h"

#include "api/c_boundary.hpp"
#include "api/callbacks.hpp"
#include "api/foreign_array.hpp"
#include "base/error.hpp"
#include "core/array_registry.hpp"
#include "operations/move_plan.hpp"

/// The opaque type of mtsarray.h.
struct mtsarray_move_plan_t : mtsarray::detail::ReusableMovePlan {
    using ReusableMovePlan::ReusableMovePlan;
};

using namespace mtsarray::detail;

namespace {

auto context(const char* function) {
    return [function]() { return std::string(function); };
}

Array& output_of(const mts_array_t* output) {
    check_not_null(output, "output");
    Array* array = find_mtsarray(*output);
    MTSARRAY_EXPECTS(array != nullptr,
                     "output was not made by mtsarray (or was already destroyed): a plan writes into mtsarray "
                     "arrays only");
    return *array;
}

// Runs `body(const Array& input)` on the input: one of ours, or a borrowed
// view of a foreign array (read through its as_dlpack).
template <typename Body>
void with_input(const mts_array_t* input, Body&& body) {
    check_not_null(input, "input");
    if (const Array* array = find_mtsarray(*input)) {
        body(*array);
    } else {
        const auto borrowed = borrow_foreign_array(*input, "input");
        body(*borrowed);
    }
}

// The call of every step, on two arrays of ours. False when an argument is
// NULL or not one of ours.
bool execute_on_ours(const mtsarray_move_plan_t* plan, const mts_array_t* output,
                                      const mts_array_t* input) {
    Array* destination = output != nullptr ? find_mtsarray(*output) : nullptr;
    const Array* source = input != nullptr ? find_mtsarray(*input) : nullptr;
    if (plan == nullptr || destination == nullptr || source == nullptr) {
        return false;
    }
    plan->execute(*destination, *source);
    return true;
}

}  // namespace

extern "C" {

mts_status_t mtsarray_move_plan_create(const mts_array_t* output, const mts_array_t* input,
                                       const mts_data_movement_t* movements, uintptr_t movements_count,
                                       mtsarray_move_plan_t** plan) {
    return guard(context("mtsarray_move_plan_create"), [&] {
        check_not_null(plan, "plan");
        const Array& destination = output_of(output);
        with_input(input, [&](const Array& source) {
            *plan = std::make_unique<mtsarray_move_plan_t>(destination, source, movements, movements_count).release();
        });
    });
}

mts_status_t mtsarray_move_plan_execute(const mtsarray_move_plan_t* plan, const mts_array_t* output,
                                        const mts_array_t* input) {
    return guard(context("mtsarray_move_plan_execute"), [&] {
        if (execute_on_ours(plan, output, input)) {
            return;
        }
        check_not_null(plan, "plan");
        Array& checked_destination = output_of(output);
        with_input(input, [&](const Array& foreign) { plan->execute(checked_destination, foreign); });
    });
}

mts_status_t mtsarray_move_plan_free(mtsarray_move_plan_t* plan) {
    return guard(context("mtsarray_move_plan_free"), [&] { delete plan; });
}

}  // extern "C"
