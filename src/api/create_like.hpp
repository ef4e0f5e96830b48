#pragma once
// The body of the `create` callback: the fill value comes as an mts_array_t
// of any origin, read on the CPU through its own as_dlpack.

#include <memory>

#include <metatensor.h>

#include "core/array.hpp"

namespace mtsarray::detail {

/// The `create` callback: same dtype, device and stream as
/// `prototype`, filled with the scalar in `fill_value` (read through its own
/// as_dlpack on the CPU). `fill_value` is destroyed in every case.
std::unique_ptr<Array> create_like(const Array& prototype, Shape shape,
                                   mts_array_t fill_value);

}  // namespace mtsarray::detail
