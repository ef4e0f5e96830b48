#pragma once
// The one interface every backend implements (CPU, CUDA, HIP). The dispatch
// layer (array operations, DLPack, validation, MovePlan) is written once
// against it. All work is queued on the given stream and may return before it
// is done; only `synchronize` and `copy_to_host` followed by `synchronize`
// make results visible to the host. Methods throw mtsarray::Error (or
// OutOfMemory) with the runtime's own error string.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <metatensor.h>

#include "move_plan.hpp"
#include "stream.hpp"

namespace mtsarray::detail {

/// A strided view of existing data, as DLPack describes it (strides counted
/// in elements, possibly zero or negative).
struct StridedView {
    const void* data;  // first element, byte_offset already applied
    std::vector<uintptr_t> shape;
    std::vector<int64_t> strides;
    size_t element_size;
};

class Backend {
public:
    virtual ~Backend() = default;

    /// "cpu", "cuda", "hip".
    virtual const char* name() const noexcept = 0;

    /// Throws Error naming the cause (built without it, no driver, no device,
    /// device id out of range) when `device` can not be used.
    virtual void check_device(DLDevice device) const = 0;

    /// At least one device of this backend can be used right now.
    virtual bool available() const noexcept = 0;

    /// Stream-ordered allocation on `stream.device()`; throws OutOfMemory.
    /// Zero bytes gives a valid, non-null pointer.
    virtual void* allocate(const Stream& stream, size_t bytes) const = 0;
    /// Stream-ordered free; never throws (failures are reported on stderr).
    virtual void deallocate(const Stream& stream, void* data, size_t bytes) const noexcept = 0;

    /// Writes `count` copies of the `element_size`-byte pattern at `value`
    /// (a host pointer) to `data`.
    virtual void fill(const Stream& stream, void* data, size_t count, const void* value,
                      size_t element_size) const = 0;

    /// Copies `bytes` bytes between two buffers of the same device.
    virtual void copy(const Stream& stream, void* destination, const void* source,
                      size_t bytes) const = 0;

    /// Executes a validated MovePlan: `output` and `input` point at the first
    /// element of each array, on the same device.
    virtual void move_data(const Stream& stream, void* output, const void* input,
                           const MovePlan& plan) const = 0;

    /// Writes the elements of `source` (same device) to `destination` in
    /// C-contiguous order of `source.shape`: swap_axes and the import of
    /// non-contiguous DLPack tensors both go through here.
    virtual void strided_copy(const Stream& stream, void* destination,
                              const StridedView& source) const = 0;

    /// Device -> host copy (pageable or pinned host memory). The data is in
    /// place after `synchronize(stream)`.
    virtual void copy_to_host(const Stream& stream, void* host_destination, const void* source,
                              size_t bytes) const = 0;
    /// Host -> device copy; `host_source` may be reused once the call returns.
    virtual void copy_from_host(const Stream& stream, void* destination, const void* host_source,
                                size_t bytes) const = 0;
    /// Copy from another device of this backend, ordered on `stream` (the
    /// source's work stream).
    virtual void copy_peer(const Stream& stream, void* destination, DLDevice destination_device,
                           const void* source, size_t bytes) const = 0;

    /// Makes `waiting` wait (on the device, without blocking the host) for
    /// the work queued so far on `producer`. No-op when they are the same.
    virtual void wait(const Stream& waiting, const Stream& producer) const = 0;

    /// Blocks the host until the work queued on `stream` is done.
    virtual void synchronize(const Stream& stream) const = 0;
};

}  // namespace mtsarray::detail
