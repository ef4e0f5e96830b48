#pragma once
// The mts_array_t vtable of mtsarray arrays.

#include <memory>

#include <metatensor.h>

#include "core/array.hpp"

namespace mtsarray::detail {

/// Hands `array` over to a new mts_array_t (its destroy deletes it).
mts_array_t to_mts_array(std::unique_ptr<Array> array) noexcept;

/// True when `array` carries mtsarray's vtable and a live Array.
bool is_mtsarray(const mts_array_t& array) noexcept;

/// The vtable slots is_mtsarray() recognises our arrays by.
namespace vtable {
mts_status_t as_dlpack(void* handle, DLManagedTensorVersioned** result, DLDevice device, const int64_t* stream,
                       DLPackVersion max_version);
mts_status_t move_data(void* output, const void* input, const mts_data_movement_t* movements, uintptr_t count);
}  // namespace vtable

/// The live Array behind `array` when is_mtsarray(array), else nullptr: one
/// lookup, inlined with find_array (for calls made at every step of a loop).
[[gnu::flatten]] inline Array* find_mtsarray(const mts_array_t& array) noexcept {
    if (array.as_dlpack != vtable::as_dlpack || array.move_data != vtable::move_data) {
        return nullptr;
    }
    return find_array(array.ptr);
}

/// The data origin registered once with libmetatensor as "mtsarray".
mts_data_origin_t data_origin();

}  // namespace mtsarray::detail
