#pragma once
// Buffer: one reference-counted block of memory on one device. Arrays and
// DLPack exports hold a shared_ptr to it; the memory goes back (in stream
// order, on the stream it was last used on) when the last holder is gone.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include <metatensor.h>

#include "stream.hpp"

namespace mtsarray::detail {

class Buffer {
public:
    /// New memory from the memory backend of `stream.device()`, allocated on
    /// `stream`. Throws OutOfMemory / Error.
    static std::shared_ptr<Buffer> allocate(const Stream& stream, size_t bytes);

    /// Memory owned by someone else (mtsarray_wrap, an imported DLPack
    /// tensor): `release` runs exactly once when the last holder is gone, and
    /// must not throw. If this throws, `release` is not called: the memory
    /// is still the caller's.
    static std::shared_ptr<Buffer> external(void* data, size_t bytes, DLDevice device,
                                            std::function<void()> release);

    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() const noexcept { return data_; }
    size_t bytes() const noexcept { return bytes_; }
    DLDevice device() const noexcept { return release_stream_.device(); }
    /// Memory owned by someone else (wrap, zero-copy import): they may write
    /// to it behind our back.
    bool is_external() const noexcept { return external_; }

    /// The stream on which the memory is freed; follows the owning array's
    /// work stream so that the free is ordered after the last work on it.
    void set_release_stream(const Stream& stream) noexcept;

private:
    Buffer(void* data, size_t bytes, Stream stream, bool external);
    void* data_;
    size_t bytes_;
    Stream release_stream_;
    bool external_;                  // false: ours, given back to the backend
    std::function<void()> release_;  // external memory: how to give it back
};

}  // namespace mtsarray::detail
