#include "core/array.hpp"

#include <limits>
#include <utility>

#include "core/handle_registry.hpp"
#include "core/backend_registry.hpp"
#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"

namespace mtsarray::detail {

namespace {

/// The bytes of an array of `shape` elements of `dtype` on `stream`'s
/// device, checked; an array outlives the call, which a graph capture could
/// not replay.
size_t bytes_of_new_array(DLDataType dtype, const Shape& shape, const Stream& stream) {
    check_dtype(dtype);
    const size_t bytes = checked_element_count(shape, element_size(dtype)) * element_size(dtype);
    detail::memory_backend(stream.device().device_type).check_not_capturing(stream, "allocating a new array");
    return bytes;
}

}  // namespace

std::unique_ptr<Array> Array::allocate(DLDataType dtype, Shape shape,
                                       const Stream& stream) {
    auto buffer = Buffer::allocate(stream, bytes_of_new_array(dtype, shape, stream));
    return std::make_unique<Array>(std::move(buffer), dtype, std::move(shape), stream);
}

std::unique_ptr<Array> Array::allocate_zeroed(DLDataType dtype, Shape shape, const Stream& stream) {
    auto buffer = Buffer::allocate_zeroed(stream, bytes_of_new_array(dtype, shape, stream));
    if (buffer == nullptr) {
        return nullptr;
    }
    return std::make_unique<Array>(std::move(buffer), dtype, std::move(shape), stream);
}

Array::Array(std::shared_ptr<Buffer> buffer, DLDataType dtype, Shape shape,
             Stream stream)
    : buffer_(std::move(buffer)), data_(buffer_->data()), device_(buffer_->device()), dtype_(dtype),
      shape_(std::move(shape)), size_(element_count(shape_)),
      stream_(stream) {
    try {
        compute_backend_ = &detail::compute_backend(device().device_type);
    } catch (const Error&) {
        // no backend for this device in this build: operations say so
    }
    handle_ = register_array(this);
}

Array::~Array() {
    // no-op when destroy() already unregistered the handle
    (void)unregister_array(handle_);
    buffer_->set_release_stream(stream_);
}

void Array::reject_handle(const void* handle, const char* role) {
    MTSARRAY_EXPECTS(handle != nullptr, std::string(role) + " array is NULL");
    throw Error(std::string(role) + " array was not made by mtsarray (or was already "
                                    "destroyed): mtsarray can only operate on its own arrays");
}

void Array::set_stream(const Stream& stream) {
    MTSARRAY_EXPECTS(same_device(stream.device(), device()),
                     "stream " + stream.describe() + " is not on the array's device");
    // a handle of another device: refused, and the array keeps its stream
    memory_backend().check_stream(stream);
    if (stream == stream_) {
        return;
    }
    if (!stream.is_none() && !stream_.is_none()) {
        memory_backend().wait(stream, stream_);
    }
    stream_ = stream;
    buffer_->set_release_stream(stream_);
}

void Array::reshape(Shape shape) {
    const size_t count = checked_element_count(shape, element_size(dtype_));
    MTSARRAY_EXPECTS(count == size(), "can not reshape to " + describe_shape(shape) + " (" +
                                          std::to_string(count) + " elements), the array has " +
                                          std::to_string(size()) + " elements");
    shape_ = std::move(shape);
    size_ = count;
}

void Array::replace_data(std::shared_ptr<Buffer> buffer, Shape shape) {
    invalidate_host_mirror();
    buffer_->set_release_stream(stream_);
    buffer_ = std::move(buffer);
    data_ = buffer_->data();
    device_ = buffer_->device();
    shape_ = std::move(shape);
    size_ = element_count(shape_);
}

const Backend& Array::memory_backend() const {
    return detail::memory_backend(device().device_type);
}

const Backend& Array::find_compute_backend() const {
    return detail::compute_backend(device().device_type);
}

namespace {
// Labels are a few integers per sample: mirror them, not bulk data.
constexpr size_t max_host_mirror_bytes = size_t(16) << 20;
}  // namespace

bool Array::wants_host_mirror() const noexcept {
    return dtype_.code == kDLInt && dtype_.bits == 32 && dtype_.lanes == 1 && shape_.size() == 2 &&
           !is_host_accessible(device().device_type) && !buffer_->is_external() &&
           !buffer_->writable_pointer_escaped() && nbytes() <= max_host_mirror_bytes;
}

void Array::hand_out_writable_pointer() const noexcept {
    buffer_->mark_writable_pointer_escaped();
    if (is_host_accessible(device().device_type)) {
        // never mirrored: no lock, so that a fork() child may hand out the
        // pointer of a host array whatever the parent's threads were doing
        return;
    }
    // always under the lock: a set_host_mirror running now either stored its
    // mirror before (dropped here) or sees the mark after (and stores none)
    std::lock_guard<std::mutex> lock(mirror_mutex_);
    host_mirror_.reset();
    has_host_mirror_.store(false, std::memory_order_release);
}

std::shared_ptr<const Buffer> Array::host_mirror() const {
    if (!has_host_mirror_.load(std::memory_order_acquire)) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mirror_mutex_);
    return host_mirror_;
}

void Array::set_host_mirror(std::shared_ptr<const Buffer> mirror) const {
    if (wants_host_mirror() && mirror != nullptr && mirror->bytes() == nbytes()) {
        std::lock_guard<std::mutex> lock(mirror_mutex_);
        // checked again under the lock: a pointer handed out meanwhile wins
        if (!buffer_->writable_pointer_escaped()) {
            host_mirror_ = std::move(mirror);
            has_host_mirror_.store(true, std::memory_order_release);
        }
    }
}

void Array::drop_host_mirror() const {
    std::lock_guard<std::mutex> lock(mirror_mutex_);
    host_mirror_.reset();
    has_host_mirror_.store(false, std::memory_order_release);
}

std::string Array::describe() const {
    return dtype_name(dtype_) + " array of shape " + describe_shape(shape_) + " on " +
           detail::describe(device());
}

}  // namespace mtsarray::detail
