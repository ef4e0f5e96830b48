#pragma once
// Shapes: the dimensions of an array, element counts that can not overflow,
// and their text in messages. Used by Array and MovePlan alike.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace mtsarray::detail {

/// The dimensions of an array. Up to `inline_capacity` of them live inside
/// the object, so that making an array of the usual 0 to 6 axes allocates
/// nothing for its shape (an array is made on every create, copy and
/// swap_axes; each host allocation costs); more go to the heap.
class Shape {
public:
    static constexpr size_t inline_capacity = 6;

    Shape() noexcept = default;
    /// `count` dimensions of 0 (as std::vector(count)); `Shape{n}` is one
    /// dimension of n.
    explicit Shape(size_t count);
    Shape(const uintptr_t* dimensions, size_t count);
    Shape(std::initializer_list<uintptr_t> dimensions) : Shape(dimensions.begin(), dimensions.size()) {}
    // for the tests and benchmarks, which describe shapes as vectors
    Shape(const std::vector<uintptr_t>& dimensions) : Shape(dimensions.data(), dimensions.size()) {}  // NOLINT

    Shape(const Shape& other) : Shape(other.data(), other.size()) {}
    Shape(Shape&& other) noexcept;
    Shape& operator=(const Shape& other);
    Shape& operator=(Shape&& other) noexcept;
    ~Shape() { release(); }

    const uintptr_t* data() const noexcept { return data_; }
    uintptr_t* data() noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }

    uintptr_t operator[](size_t axis) const noexcept { return data_[axis]; }
    uintptr_t& operator[](size_t axis) noexcept { return data_[axis]; }
    uintptr_t front() const noexcept { return data_[0]; }
    uintptr_t back() const noexcept { return data_[size_ - 1]; }

    const uintptr_t* begin() const noexcept { return data_; }
    const uintptr_t* end() const noexcept { return data_ + size_; }

    friend bool operator==(const Shape& a, const Shape& b) noexcept;
    friend bool operator!=(const Shape& a, const Shape& b) noexcept { return !(a == b); }

private:
    bool is_inline() const noexcept { return data_ == inline_; }
    // gives back heap storage; leaves the shape empty and inline
    void release() noexcept;
    // makes room for `count` dimensions (contents not kept)
    void reserve_uninitialized(size_t count);

    uintptr_t inline_[inline_capacity] = {};
    uintptr_t* data_ = inline_;
    size_t size_ = 0;
};

/// Number of elements in `shape`; throws Error when a dimension does not fit
/// in int64_t (DLPack's type) or the byte size of such an array of
/// `element_size` would overflow. Every shape that enters mtsarray goes
/// through here.
size_t checked_element_count(const Shape& shape, size_t element_size);

/// "[3, 4]" / "[]" for messages.
std::string describe_shape(const Shape& shape);

/// Number of elements of a shape that passed checked_element_count.
size_t element_count(const Shape& shape) noexcept;

}  // namespace mtsarray::detail
