// mtsarray_move_plan_*: movement plans made once and executed many times
// (include/mtsarray.h).

#include <memory>
#include <string>

#include "mtsarray.h"

#include "api/c_boundary.hpp"
#include "api/callbacks.hpp"
#include "api/foreign_array.hpp"
#include "base/error.hpp"
#include "core/handle_registry.hpp"
#include "operations/reusable_move_plan.hpp"

// An mtsarray_move_plan_t* is a handle (core/handle_registry.hpp), never
// the plan's address: a plan freed twice, used after its free, or any
// other pointer passed as a plan is found to be no plan, and refused,
// without being read. mtsarray_move_plan_t itself is never defined.

using namespace mtsarray::detail;

namespace {

constexpr const char* not_a_plan = "plan was not made by mtsarray_move_plan_create, or was already freed";

mtsarray_move_plan_t* register_plan(std::unique_ptr<ReusableMovePlan> plan) {
    auto* handle = static_cast<mtsarray_move_plan_t*>(register_handle(plan.get(), HandleKind::move_plan));
    plan.release();  // the registry's from now on, until mtsarray_move_plan_free
    return handle;
}

const ReusableMovePlan& plan_of(const mtsarray_move_plan_t* handle) {
    check_not_null(handle, "plan");
    const auto* plan = static_cast<const ReusableMovePlan*>(find_handle(handle, HandleKind::move_plan));
    MTSARRAY_EXPECTS(plan != nullptr, not_a_plan);
    return *plan;
}

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
bool execute_on_ours(const mtsarray_move_plan_t* handle, const mts_array_t* output, const mts_array_t* input) {
    const auto* plan = static_cast<const ReusableMovePlan*>(find_handle(handle, HandleKind::move_plan));
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
            *plan = register_plan(std::make_unique<ReusableMovePlan>(destination, source, movements, movements_count));
        });
    });
}

mts_status_t mtsarray_move_plan_execute(const mtsarray_move_plan_t* plan, const mts_array_t* output,
                                        const mts_array_t* input) {
    return guard(context("mtsarray_move_plan_execute"), [&] {
        if (execute_on_ours(plan, output, input)) {
            return;
        }
        const ReusableMovePlan& checked_plan = plan_of(plan);
        Array& checked_destination = output_of(output);
        with_input(input, [&](const Array& foreign) { checked_plan.execute(checked_destination, foreign); });
    });
}

mts_status_t mtsarray_move_plan_free(mtsarray_move_plan_t* plan) {
    return guard(context("mtsarray_move_plan_free"), [&] {
        if (plan == nullptr) {
            return;  // like free(NULL)
        }
        // of two threads freeing one plan, one gets it, the other an error
        auto* freed = static_cast<ReusableMovePlan*>(unregister_handle(plan, HandleKind::move_plan));
        MTSARRAY_EXPECTS(freed != nullptr, not_a_plan);
        delete freed;
    });
}

}  // extern "C"
