#pragma once
// Calls into code that is not ours and reports failures through the
// thread's last error: a callback of an array another library made, a
// function of libmetatensor. The last error is emptied before each call, so
// that a failure is reported with the callee's own message: a callee that
// fails without setting one would otherwise hand on whatever error the
// thread had before (an unrelated one), nested one level deeper in our
// message at every failed call.

#include <string>

#include <metatensor.h>

#include "base/error.hpp"

namespace mtsarray::detail {

/// Empties the thread's last error (message and origin ""): the state of a
/// thread that never failed.
void clear_last_error() noexcept;

/// Why a call made after clear_last_error() failed: the message it set, or
/// "the callback failed without saying why" when it set none.
std::string failure_reason();

/// Runs `call()`, which returns an mts_status_t, with the last error
/// emptied first; throws Error("<what> failed: <failure_reason()>") unless
/// it returns MTS_SUCCESS.
template <typename Call>
void call_foreign(const std::string& what, Call&& call) {
    clear_last_error();
    if (call() != MTS_SUCCESS) {
        throw Error(what + " failed: " + failure_reason());
    }
}

/// The same for a call that returns a pointer, NULL on failure: returns it.
template <typename Call>
auto call_foreign_for_pointer(const std::string& what, Call&& call) {
    clear_last_error();
    auto* result = call();
    if (result == nullptr) {
        throw Error(what + " failed: " + failure_reason());
    }
    return result;
}

}  // namespace mtsarray::detail
