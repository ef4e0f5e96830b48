#pragma once
// Where device memory comes from. By default a backend's own allocator
// (stream-ordered, from a pool that keeps freed memory for reuse); a program
// that manages GPU memory itself (PyTorch's caching allocator, RMM, a
// simulation code's pool) installs its own with mtsarray_set_allocator, and
// every later allocation on that device type goes through it. A buffer
// remembers the allocator that made it and is freed by that one, whatever
// is installed by then.

#include <cstddef>
#include <memory>

#include <metatensor.h>

#include "mtsarray.h"
#include "stream.hpp"

namespace mtsarray::detail {

class Allocator {
public:
    virtual ~Allocator() = default;
    /// `bytes` bytes usable by work queued on `stream` (on its device) from
    /// now on. Zero bytes give a valid, non-null pointer. Throws OutOfMemory.
    virtual void* allocate(const Stream& stream, size_t bytes) const = 0;
    /// Gives memory back in stream order: after the work queued on `stream`
    /// so far. Never throws.
    virtual void deallocate(const Stream& stream, void* data, size_t bytes) const noexcept = 0;
};

/// The allocator for new memory of `type`: the user's, else the memory
/// backend's (throws Error when that backend was not compiled in).
std::shared_ptr<const Allocator> current_allocator(DLDeviceType type);

/// Installs `allocator` (copied) for `type` (kDLCUDA or kDLROCM), or the
/// backend's own again when it is NULL. Throws Error for other types and for
/// an allocator with a NULL function.
void set_user_allocator(DLDeviceType type, const mtsarray_allocator_t* allocator);

}  // namespace mtsarray::detail
