// make_filled: a new array with every element set to one value.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/backend_registry.hpp"
#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

std::unique_ptr<Array> make_filled(DLDataType dtype, Shape shape, const void* value,
                                   const Stream& stream) {
    check_host_thread_count(stream.device());
    check_dtype(dtype);
    check_device_usable(stream.device());
    MTSARRAY_EXPECTS(value != nullptr, "the fill value is NULL");
    // the caller's value may be reused as soon as we return: keep a copy
    unsigned char pattern[max_element_size];
    std::memcpy(pattern, value, element_size(dtype));

    // zeros (libmetatensor's outputs, mtsarray_zeros) from an allocator that
    // has them for less than a fill: the host's calloc, which does not write
    // pages fresh from the kernel a second time
    const bool zeros = std::all_of(pattern, pattern + element_size(dtype), [](unsigned char byte) { return byte == 0; });
    if (zeros) {
        if (auto array = Array::allocate_zeroed(dtype, shape, stream)) {
            return array;
        }
    }
    auto array = Array::allocate(dtype, std::move(shape), stream);
    array->compute_backend().fill(stream, array->data(), array->size(), pattern, element_size(dtype));
    return array;
}

}  // namespace mtsarray::detail
