#include "shape.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include "error.hpp"

namespace mtsarray::detail {

size_t checked_element_count(const std::vector<uintptr_t>& shape, size_t element_size) {
    // DLPack describes every dimension as an int64_t: a larger one could not
    // be exported, not even in an empty array
    for (size_t axis = 0; axis < shape.size(); axis++) {
        MTSARRAY_EXPECTS(shape[axis] <= static_cast<uintptr_t>(std::numeric_limits<int64_t>::max()),
                         "shape " + describe_shape(shape) + " is invalid: dimension " + std::to_string(axis) +
                             " is larger than INT64_MAX, the largest a DLPack tensor can describe");
    }
    // an empty array never overflows, whatever its other dimensions; this
    // must be decided first: a product that wrapped around to 0 is not empty
    for (auto dimension : shape) {
        if (dimension == 0) {
            return 0;
        }
    }
    size_t count = 1;
    bool overflow = false;
    for (auto dimension : shape) {
        if (count > std::numeric_limits<size_t>::max() / dimension) {
            overflow = true;
        }
        count *= dimension;
    }
    MTSARRAY_EXPECTS(!overflow && count <= std::numeric_limits<size_t>::max() / element_size,
                     "shape " + describe_shape(shape) + " is too large: its size in bytes overflows");
    return count;
}

size_t element_count(const std::vector<uintptr_t>& shape) noexcept {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

std::string describe_shape(const std::vector<uintptr_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return text + "]";
}

}  // namespace mtsarray::detail
