#pragma once
// DLPack data types: which ones mtsarray stores, their size and their name.

#include <cstddef>
#include <string>

#include <metatensor.h>

namespace mtsarray::detail {

/// Largest element mtsarray stores (complex128).
constexpr size_t max_element_size = 16;

/// Throws Error unless `dtype` is a fixed-width type mtsarray stores: int and
/// uint 8-64, float 16/32/64, bfloat16, bool (8 bits), complex 64/128, the
/// 8-bit float8 codes; lanes == 1. Sub-byte types get a clear error.
void check_any_dtype(DLDataType dtype);

/// check_any_dtype(), with float32/64 and int32/64 (most arrays, checked
/// on every array made) accepted without the lookups.
inline void check_dtype(DLDataType dtype) {
    const bool common_width = dtype.bits == 64 || dtype.bits == 32;
    if (!(common_width && dtype.lanes == 1 && (dtype.code == kDLFloat || dtype.code == kDLInt))) {
        check_any_dtype(dtype);
    }
}

/// Bytes per element (dtype must have passed check_dtype).
inline size_t element_size(DLDataType dtype) noexcept { return dtype.bits / 8; }

/// "float64", "complex128", "float8_e4m3fn", "int32x4" ... for messages.
std::string dtype_name(DLDataType dtype);

inline bool same_dtype(DLDataType a, DLDataType b) noexcept {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

}  // namespace mtsarray::detail
