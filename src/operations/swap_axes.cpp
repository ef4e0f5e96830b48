#include <string>
#include <utility>

#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

void swap_axes(Array& array, uintptr_t axis_1, uintptr_t axis_2) {
    check_host_thread_count(array.device());
    const auto& shape = array.shape();
    MTSARRAY_EXPECTS(axis_1 < shape.size() && axis_2 < shape.size(),
                     "can not swap axes " + std::to_string(axis_1) + " and " + std::to_string(axis_2) +
                         " of an array with " + std::to_string(shape.size()) + " axes");
    if (axis_1 == axis_2) {
        return;
    }
    auto swapped_shape = shape;
    std::swap(swapped_shape[axis_1], swapped_shape[axis_2]);
    auto source_strides = contiguous_strides(shape);
    std::swap(source_strides[axis_1], source_strides[axis_2]);

    // swapping around size-1 axes only: the bytes are already in order
    if (is_c_contiguous(swapped_shape, source_strides.data())) {
        array.reshape(std::move(swapped_shape));
        return;
    }

    // a new buffer that outlives the call: not something a graph can replay
    array.memory_backend().check_not_capturing(array.stream(), "swap_axes");
    auto buffer = Buffer::allocate(array.stream(), array.nbytes());
    const StridedView source = {array.data(), swapped_shape, source_strides, element_size(array.dtype())};
    array.compute_backend().strided_copy(array.stream(), buffer->data(), source);
    array.replace_data(std::move(buffer), std::move(swapped_shape));
}

}  // namespace mtsarray::detail
