#pragma once
// Shapes: element counts that can not overflow, and their text in messages.
// Used by Array and MovePlan alike.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mtsarray::detail {

/// Number of elements in `shape`; throws Error when a dimension does not fit
/// in int64_t (DLPack's type) or the byte size of such an array of
/// `element_size` would overflow. Every shape that enters mtsarray goes
/// through here.
size_t checked_element_count(const std::vector<uintptr_t>& shape, size_t element_size);

/// "[3, 4]" / "[]" for messages.
std::string describe_shape(const std::vector<uintptr_t>& shape);

/// Number of elements of a shape that passed checked_element_count.
size_t element_count(const std::vector<uintptr_t>& shape) noexcept;

}  // namespace mtsarray::detail
