#pragma once
// Errors cross into Python as exceptions and nowhere else: a failed mtsarray
// or metatensor call becomes mtsarray.Error carrying the library's message
// (mts_last_error), wrong arguments become TypeError / ValueError.

#include <metatensor.h>
#include <nanobind/nanobind.h>

namespace mtsarray_python {

/// Creates mtsarray.Error (a RuntimeError) in `module`; called once at import.
void register_error_type(nanobind::module_& module);

/// Raises mtsarray.Error with the message of the last failed metatensor or
/// mtsarray call on this thread. Needs the GIL.
[[noreturn]] void raise_last_error();

/// Raises mtsarray.Error with `message`. Needs the GIL.
[[noreturn]] void raise_error(const std::string& message);

inline void check(mts_status_t status) {
    if (status != MTS_SUCCESS) {
        raise_last_error();
    }
}

}  // namespace mtsarray_python
