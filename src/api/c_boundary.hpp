#pragma once
// The C boundary: every mts_array_t callback and every mtsarray_* function
// runs its body through `guard`, which catches everything, sets the last
// error (origin "mtsarray", the exception_ptr as data so that C++ callers get
// the original exception back) and returns a status. Nothing throws or aborts
// across the boundary.

#include <cstdint>
#include <exception>
#include <string>

#include <metatensor.h>

#include "base/shape.hpp"

namespace mtsarray::detail {

/// Origin string of every error mtsarray sets.
constexpr const char* error_origin = "mtsarray";

/// Records the exception being handled as the last error, prefixed with
/// `context` ("mtsarray_zeros", "move_data on float64 array [3, 4] on cpu").
mts_status_t set_last_error_from_current_exception(const std::string& context) noexcept;

/// Throws Error("<name> is NULL") for a NULL pointer argument.
void check_not_null(const void* pointer, const char* name);

/// A (shape, shape_count) argument pair as a Shape; `shape` may only be
/// NULL when `count` is 0.
Shape shape_argument(const uintptr_t* shape, uintptr_t count);

/// Runs `body()`; MTS_SUCCESS, or MTS_CALLBACK_ERROR with the last error set
/// as "<context()>: <what()>". `context` is only called on failure.
template <typename Body, typename Context>
mts_status_t guard(Context&& context, Body&& body) noexcept {
    try {
        body();
        return MTS_SUCCESS;
    } catch (...) {
        std::string prefix;
        try {
            prefix = context();
        } catch (...) {
            prefix = "mtsarray";
        }
        return set_last_error_from_current_exception(prefix);
    }
}

}  // namespace mtsarray::detail
