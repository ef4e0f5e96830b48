#include "base/shape.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <utility>
#include <string>

#include "base/error.hpp"

namespace mtsarray::detail {

Shape::Shape(size_t count) {
    reserve_uninitialized(count);
    std::fill(data_, data_ + count, uintptr_t(0));
    size_ = count;
}

Shape::Shape(const uintptr_t* dimensions, size_t count) {
    reserve_uninitialized(count);
    std::copy(dimensions, dimensions + count, data_);
    size_ = count;
}

Shape::Shape(Shape&& other) noexcept {
    *this = std::move(other);
}

Shape& Shape::operator=(const Shape& other) {
    if (this != &other) {
        reserve_uninitialized(other.size_);
        std::copy(other.data_, other.data_ + other.size_, data_);
        size_ = other.size_;
    }
    return *this;
}

Shape& Shape::operator=(Shape&& other) noexcept {
    if (this == &other) {
        return *this;
    }
    release();
    if (other.is_inline()) {
        std::copy(other.data_, other.data_ + other.size_, inline_);
    } else {
        data_ = other.data_;  // the heap storage changes hands
        other.data_ = other.inline_;
    }
    size_ = other.size_;
    other.size_ = 0;
    return *this;
}

void Shape::release() noexcept {
    if (!is_inline()) {
        delete[] data_;
        data_ = inline_;
    }
    size_ = 0;
}

void Shape::reserve_uninitialized(size_t count) {
    if (count <= inline_capacity) {
        release();
        return;
    }
    if (!is_inline() && count <= size_) {
        return;  // the heap storage is large enough: reused
    }
    auto* storage = new uintptr_t[count];  // may throw: *this is unchanged
    release();
    data_ = storage;
}

bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.data_, a.data_ + a.size_, b.data_);
}

size_t checked_element_count(const Shape& shape, size_t element_size) {
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

size_t element_count(const Shape& shape) noexcept {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

std::string describe_shape(const Shape& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return text + "]";
}

}  // namespace mtsarray::detail
