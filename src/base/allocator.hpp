#pragma once
// Where device memory comes from: the interface of a backend's own
// allocator and of the one a user installs (core/installed_allocator.hpp
// says which one serves a new allocation).

#include <cstddef>
#include <memory>

#include <metatensor.h>

#include "base/stream.hpp"

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
    /// allocate() of memory that already holds zeros, for an allocator that
    /// can give it for less than allocate() and a fill (the host's calloc
    /// does not write pages fresh from the kernel, which are zero); nullptr
    /// where it can not (the default), and the caller fills. Freed with
    /// deallocate(). Throws OutOfMemory.
    virtual void* allocate_zeroed(const Stream& stream, size_t bytes) const {
        (void)stream;
        (void)bytes;
        return nullptr;
    }
};

}  // namespace mtsarray::detail
