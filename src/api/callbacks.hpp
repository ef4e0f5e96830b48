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

/// The data origin registered once with libmetatensor as "mtsarray".
mts_data_origin_t data_origin();

}  // namespace mtsarray::detail
