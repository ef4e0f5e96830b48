#pragma once
// Buffer: one reference-counted block of memory on one device. Arrays and
// DLPack exports hold a shared_ptr to it; the memory goes back when the last
// holder is gone, in stream order:
//  - on its release stream (the owning array's work stream), after the work
//    queued there;
//  - and after the work of every other stream that used it, recorded with
//    `record_use` (a marker each, waited on by the release stream before the
//    free; PyTorch's recordStream does the same). Only the markers are used
//    then, never those streams: a stream belongs to whoever made it, and may
//    be gone by the time the memory is;
// so that freeing never overtakes a read or a write still queued on the
// device, and never blocks the host. A write that mtsarray queues into the
// memory waits for those uses the same way (`order_write`). Memory owned by
// someone else (wrapped, imported) is handed back to its owner the same way,
// once that work is done.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <metatensor.h>

#include "base/allocator.hpp"
#include "base/backend.hpp"
#include "base/stream.hpp"

namespace mtsarray::detail {

class Buffer {
public:
    /// New memory on `stream.device()`, allocated on `stream` by the
    /// device's allocator (core/installed_allocator.hpp). Throws OutOfMemory / Error.
    static std::shared_ptr<Buffer> allocate(const Stream& stream, size_t bytes);
    /// allocate() of memory holding zeros where the device's allocator has
    /// it for less than a fill (Allocator::allocate_zeroed); nullptr where
    /// it has not (then the caller allocates and fills).
    static std::shared_ptr<Buffer> allocate_zeroed(const Stream& stream, size_t bytes);

    /// Memory owned by someone else (mtsarray_wrap, an imported DLPack
    /// tensor): `release` runs exactly once when the last holder is gone and
    /// the device work using the memory is done (possibly on another
    /// thread), and must not throw. If this throws, `release` is not called:
    /// the memory is still the caller's.
    static std::shared_ptr<Buffer> external(void* data, size_t bytes, DLDevice device,
                                            std::function<void()> release);

    /// Only Buffer's own functions can make a Key: the constructor is
    /// public for std::make_shared alone.
    class Key {
        friend class Buffer;
        Key() = default;
    };
    Buffer(Key, void* data, size_t bytes, Stream stream, std::shared_ptr<const Allocator> allocator);

    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() const noexcept { return data_; }
    size_t bytes() const noexcept { return bytes_; }
    DLDevice device() const noexcept { return device_; }
    /// Memory owned by someone else (wrap, zero-copy import): they may write
    /// to it behind our back.
    bool is_external() const noexcept { return allocator_ == nullptr; }

    /// The stream on which the memory is freed; follows the owning array's
    /// work stream so that the free is ordered after the last work on it.
    /// Host memory has no streams: nothing to follow (and no lock taken).
    void set_release_stream(const Stream& stream) {
        if (!host_memory_) {
            set_device_release_stream(stream);
        }
    }

    /// Work queued on `stream` so far uses this memory: the free waits for
    /// it. No-op for the release stream itself and for host streams. Called
    /// after queuing the work. Thread-safe. When the use can not be
    /// recorded (the runtime fails to make the marker), the work queued is
    /// waited for on the host -- or, failing that too, the memory is never
    /// given back -- and the error is thrown: a failed call never leaves a
    /// queued read that the free could overtake.
    void record_use(const Stream& stream) {
        if (!stream.is_none()) {  // host work is finished when the call that did it returns
            record_device_use(stream);
        }
    }

    /// Work about to be queued on `stream` writes this memory: it must not
    /// overtake the uses recorded on other streams (reads that mtsarray
    /// queued there). A device stream waits for them (an event wait each,
    /// no host block); a host writer (`stream` is none) waits for them on
    /// the host. Where `stream` is the release stream, those uses are
    /// covered from then on (the free comes after the write) and forgotten.
    /// One atomic load when no other stream used the memory. Called before
    /// queuing the write. Thread-safe.
    void order_write(const Stream& stream) {
        if (has_uses_.load(std::memory_order_acquire)) {
            order_write_after_uses(stream);
        }
    }

    /// A pointer through which the data may be written left mtsarray's
    /// control (mtsarray_data, a writable DLPack export): from now on no
    /// host copy of the bytes can be trusted. Permanent; thread-safe.
    void mark_writable_pointer_escaped() noexcept;
    bool writable_pointer_escaped() const noexcept;

private:
    /// The holder of memory `allocator` gave; frees it when the holder can
    /// not be made.
    static std::shared_ptr<Buffer> hold(std::shared_ptr<const Allocator> allocator, const Stream& stream, void* data,
                                        size_t bytes);
    void record_device_use(const Stream& stream);
    void order_write_after_uses(const Stream& stream);
    void set_device_release_stream(const Stream& stream);

    void* data_;
    size_t bytes_;
    DLDevice device_;
    bool host_memory_;  // host-accessible: its only stream is "none"
    std::shared_ptr<const Allocator> allocator_;  // nullptr: external memory
    std::function<void()> release_;               // external memory: how to give it back

    std::atomic<bool> escaped_{false};

    mutable std::mutex mutex_;  // guards what follows
    Stream release_stream_;
    std::vector<std::pair<Stream, std::shared_ptr<const StreamMarker>>> uses_;
    bool kept_forever_ = false;  // a use could be neither recorded nor waited for
    std::atomic<bool> has_uses_{false};  // !uses_.empty(), read without the lock
};

}  // namespace mtsarray::detail
