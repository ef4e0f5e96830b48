#pragma once
// Array: the object behind every mts_array_t that mtsarray makes. A shape
// and dtype over a reference-counted Buffer on one device, plus the work
// stream all its operations are queued on. Data is always C-contiguous.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <metatensor.h>

#include "core/handle_registry.hpp"
#include "base/backend.hpp"
#include "core/buffer.hpp"
#include "base/dtype.hpp"
#include "base/shape.hpp"
#include "base/stream.hpp"

namespace mtsarray::detail {

class Array {
public:
    /// Uninitialised memory for `shape` elements of `dtype`, allocated on
    /// `stream` (which also gives the device). Validates dtype and shape.
    static std::unique_ptr<Array> allocate(DLDataType dtype, Shape shape,
                                           const Stream& stream);
    /// allocate() of zeros, where the device's allocator has zeroed memory
    /// for less than a fill (Buffer::allocate_zeroed); nullptr otherwise.
    static std::unique_ptr<Array> allocate_zeroed(DLDataType dtype, Shape shape, const Stream& stream);

    /// An array over existing memory (wrap, zero-copy import).
    Array(std::shared_ptr<Buffer> buffer, DLDataType dtype, Shape shape,
          Stream stream);
    ~Array();
    Array(const Array&) = delete;
    Array& operator=(const Array&) = delete;

    /// The live Array behind `handle` (an mts_array_t's ptr); throws Error
    /// when it is not one of ours (a foreign or destroyed array).
    static Array& from_handle(const void* handle, const char* role) {
        Array* array = find_array(handle);
        if (array == nullptr) {
            reject_handle(handle, role);
        }
        return *array;
    }

    /// The value of `mts_array_t::ptr` for this array (handle_registry.hpp).
    void* handle() const noexcept { return handle_; }

    DLDevice device() const noexcept { return device_; }
    DLDataType dtype() const noexcept { return dtype_; }
    const Shape& shape() const noexcept { return shape_; }
    size_t size() const noexcept { return size_; }  // elements
    size_t nbytes() const noexcept { return size_ * element_size(dtype_); }  // bytes of data
    void* data() const noexcept { return data_; }
    const std::shared_ptr<Buffer>& buffer() const noexcept { return buffer_; }
    const Stream& stream() const noexcept { return stream_; }

    /// Switches the work stream; the new stream first waits for the work
    /// queued on the old one (device-side, the host does not block).
    void set_stream(const Stream& stream);

    /// Same number of elements, new shape (no data movement).
    void reshape(Shape shape);

    /// Points the array at new data (swap_axes writes into a new buffer).
    void replace_data(std::shared_ptr<Buffer> buffer, Shape shape);

    /// The backend owning this array's memory / the one computing on it.
    const Backend& memory_backend() const;
    const Backend& compute_backend() const {
        return compute_backend_ != nullptr ? *compute_backend_ : find_compute_backend();
    }

    /// "float64 array of shape [3, 4] on cuda:0", for messages.
    std::string describe() const;

    /// Whether this array's bytes and `other`'s share memory (views of one
    /// buffer, or wrapped memory that overlaps): an operation reading one
    /// and writing the other then goes through a snapshot.
    bool overlaps(const Array& other) const noexcept {
        const auto* begin = static_cast<const unsigned char*>(data_);
        const auto* other_begin = static_cast<const unsigned char*>(other.data_);
        return nbytes() != 0 && other.nbytes() != 0 && begin < other_begin + other.nbytes() &&
               other_begin < begin + nbytes();
    }

    // ---- host mirror -------------------------------------------------------
    // libmetatensor reads Labels values back on the CPU (as_dlpack(cpu)) to
    // check and look them up. Small int32 2-D arrays on a GPU keep an
    // immutable host copy of their bytes, so that these reads cost a memcpy,
    // not a device-to-host transfer and a stream synchronisation.
    //
    // When the mirror can be trusted: only while every write to the device
    // data goes through mtsarray, which drops the mirror first. So never for
    // memory someone else owns (wrapped, imported zero-copy), and never again
    // once a writable pointer to the buffer has left mtsarray
    // (mtsarray_data, a same-device as_dlpack export, which a zero-copy
    // re-import may then write through): mark_writable_pointer_escaped().

    /// Whether this array keeps a host mirror when one is at hand.
    bool wants_host_mirror() const noexcept;
    /// A pointer through which the data can be written is handed out: drops
    /// the mirror, and no mirror is kept for this buffer from now on.
    void hand_out_writable_pointer() const noexcept;
    /// The mirror (host memory, the array's bytes), or nullptr.
    std::shared_ptr<const Buffer> host_mirror() const;
    /// Records `mirror` (ignored unless wants_host_mirror()).
    void set_host_mirror(std::shared_ptr<const Buffer> mirror) const;
    /// Called before anything that may write the device data.
    void invalidate_host_mirror() const {
        if (has_host_mirror_.load(std::memory_order_acquire)) {
            drop_host_mirror();
        }
    }
    /// Called before queuing a write of the data on `stream` (the array's,
    /// or none for a host write): drops the host mirror, and orders the
    /// write after the reads mtsarray queued on other streams
    /// (Buffer::order_write). Two atomic loads when there is neither.
    void prepare_write(const Stream& stream) const {
        invalidate_host_mirror();
        buffer_->order_write(stream);
    }

private:
    const Backend& find_compute_backend() const;
    [[noreturn]] static void reject_handle(const void* handle, const char* role);
    void drop_host_mirror() const;

    void* handle_ = nullptr;
    // looked up once (the device never changes): every operation needs it
    const Backend* compute_backend_ = nullptr;
    std::shared_ptr<Buffer> buffer_;
    // the buffer's, kept here: every operation reads them, one load less
    void* data_;
    DLDevice device_;
    DLDataType dtype_;
    Shape shape_;
    size_t size_;  // elements, kept with shape_
    Stream stream_;
    mutable std::mutex mirror_mutex_;
    mutable std::shared_ptr<const Buffer> host_mirror_;
    // lets the hot paths skip the mutex when there is no mirror to drop
    mutable std::atomic<bool> has_host_mirror_{false};
};

}  // namespace mtsarray::detail
