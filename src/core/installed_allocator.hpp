#pragma once
// Which allocator serves new memory of a device type. By default the
// backend's own (stream-ordered, from a pool that keeps freed memory for
// reuse); a program that manages GPU memory itself (PyTorch's caching
// allocator, RMM, a simulation code's pool) installs its own with
// mtsarray_set_allocator, and every later allocation on that device type goes
// through it. A buffer remembers the allocator that made it and is freed by
// that one, whatever is installed by then.

#include <memory>

#include <metatensor.h>

#include "mtsarray.h"
#include "base/allocator.hpp"

namespace mtsarray::detail {

/// The allocator for new memory of `type`: the user's, else the memory
/// backend's (throws Error when that backend was not compiled in).
std::shared_ptr<const Allocator> current_allocator(DLDeviceType type);

/// Installs `allocator` (copied) for `type` (kDLCUDA or kDLROCM), or the
/// backend's own again when it is NULL. Throws Error for other types and for
/// an allocator with a NULL function.
void set_user_allocator(DLDeviceType type, const mtsarray_allocator_t* allocator);

}  // namespace mtsarray::detail
