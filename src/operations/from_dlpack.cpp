#include <limits>
#include <string>
#include <vector>

#include "core/backend_registry.hpp"
#include "base/device.hpp"
#include "base/dlpack_owner.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

std::vector<int64_t> contiguous_strides(const Shape& shape) {
    // unsigned: an empty array may have dimensions whose product overflows
    // (its strides do not matter); a non-empty one fits by construction
    std::vector<int64_t> strides(shape.size());
    uint64_t stride = 1;
    for (size_t axis = shape.size(); axis-- > 0;) {
        strides[axis] = static_cast<int64_t>(stride);
        stride *= static_cast<uint64_t>(shape[axis]);
    }
    return strides;
}

/// Throws unless every byte offset of the view fits in int64_t, with room
/// for one more stride per axis (so that the strided copies' products of
/// strides, sizes and the element size can not overflow). Axes of one
/// element are left out: DLPack lets their stride be anything.
void check_strides_fit(const Shape& shape, const int64_t* strides, size_t element_size) {
    uint64_t span = 0;  // sum of |stride| * size, in bytes
    bool fits = true;
    for (size_t axis = 0; axis < shape.size() && fits; axis++) {
        if (shape[axis] <= 1) {
            continue;
        }
        const int64_t stride = strides[axis];
        const uint64_t magnitude = stride < 0 ? uint64_t(0) - static_cast<uint64_t>(stride) : static_cast<uint64_t>(stride);
        uint64_t extent = 0;
        fits = !__builtin_mul_overflow(magnitude, static_cast<uint64_t>(shape[axis]), &extent) &&
               !__builtin_mul_overflow(extent, static_cast<uint64_t>(element_size), &extent) &&
               !__builtin_add_overflow(span, extent, &span) &&
               span <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    MTSARRAY_EXPECTS(fits, "invalid DLPack tensor: its strides span more than 2^63 bytes");
}

bool is_c_contiguous(const Shape& shape, const int64_t* strides) {
    if (strides == nullptr) {
        return true;
    }
    // no element, nothing is out of order; decided first, so that the
    // products below stay within the (checked) element count
    for (auto dimension : shape) {
        if (dimension == 0) {
            return true;
        }
    }
    uint64_t expected = 1;
    for (size_t axis = shape.size(); axis-- > 0;) {
        if (shape[axis] != 1 && (strides[axis] < 0 || static_cast<uint64_t>(strides[axis]) != expected)) {
            return false;
        }
        expected *= static_cast<uint64_t>(shape[axis]);
    }
    return true;
}

std::unique_ptr<Array> from_dlpack(DLManagedTensorVersioned* tensor) {
    // we own the tensor from here on, whatever happens
    DLPackOwner owner(tensor);
    MTSARRAY_EXPECTS(tensor != nullptr, "the DLPack tensor is NULL");
    MTSARRAY_EXPECTS(tensor->version.major == DLPACK_MAJOR_VERSION,
                     "unsupported DLPack version " + std::to_string(tensor->version.major) + "." +
                         std::to_string(tensor->version.minor) + ", mtsarray reads DLPack " +
                         std::to_string(DLPACK_MAJOR_VERSION) + ".x");
    const DLTensor& source = tensor->dl_tensor;
    // No limit on the axes of our own (an array may have any number, and
    // its export comes back): DLPack's int32 is the only one. The shape has
    // ndim entries, as DLPack requires of the producer.
    MTSARRAY_EXPECTS(source.ndim >= 0, "invalid DLPack tensor: ndim = " + std::to_string(source.ndim));
    MTSARRAY_EXPECTS(source.ndim == 0 || source.shape != nullptr,
                     "invalid DLPack tensor: shape is NULL with ndim = " + std::to_string(source.ndim));
    check_dtype(source.dtype);
    check_device_usable(source.device);

    Shape shape(static_cast<size_t>(source.ndim));
    for (size_t axis = 0; axis < shape.size(); axis++) {
        MTSARRAY_EXPECTS(source.shape[axis] >= 0, "invalid DLPack tensor: shape[" + std::to_string(axis) +
                                                      "] = " + std::to_string(source.shape[axis]));
        shape[axis] = static_cast<uintptr_t>(source.shape[axis]);
    }
    const size_t size = element_size(source.dtype);
    const size_t count = checked_element_count(shape, size);
    MTSARRAY_EXPECTS(count == 0 || source.data != nullptr, "invalid DLPack tensor: data is NULL");
    auto* data = static_cast<unsigned char*>(source.data) + (source.data ? source.byte_offset : 0);
    const bool read_only = (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;

    if (is_c_contiguous(shape, source.strides) && !read_only) {
        auto buffer = Buffer::external(data, count * size, source.device, [tensor]() noexcept {
            if (tensor->deleter != nullptr) {
                tensor->deleter(tensor);
            }
        });
        owner.release();  // the buffer calls the deleter from now on
        return std::make_unique<Array>(std::move(buffer), source.dtype, std::move(shape),
                                       Stream::default_for(source.device));
    }

    // read-only or strided: our own C-contiguous copy on the same device
    check_host_thread_count(source.device);
    if (source.strides != nullptr && count != 0) {
        check_strides_fit(shape, source.strides, size);
    }
    auto array = Array::allocate(source.dtype, shape, Stream::default_for(source.device));
    std::vector<int64_t> strides = source.strides == nullptr
                                       ? contiguous_strides(shape)
                                       : std::vector<int64_t>(source.strides, source.strides + source.ndim);
    const StridedView view = {data, std::move(shape), std::move(strides), size};
    // the producer's memory goes back once the copy has read it: at once on
    // the host, after the queued copy on a device (the host does not wait).
    // Ordered by the backend that made the copy: for the host memory of a
    // GPU (page-locked, managed) that is the CPU's, on the host's stream,
    // which the GPU backend owning the memory has no queue for.
    const Backend& copier = array->compute_backend();
    auto pending = std::make_shared<DLPackOwner>(nullptr);  // before anything is queued
    copier.strided_copy(array->stream(), array->data(), view);
    pending->adopt(owner.release());
    try {
        copier.release_after(array->stream(), [pending]() noexcept { pending->reset(); });
    } catch (...) {
        // could not defer the release: the copy must be done before `pending`
        // lets the tensor go, on this (rare) error path the host waits
        copier.synchronize(array->stream());
        throw;
    }
    return array;
}

}  // namespace mtsarray::detail
