#pragma once
// Memory is moved in "units": unsigned integers of 1, 2, 4 or 8 bytes, or a
// 16-byte aligned pair of 8-byte words. Each unit type compiles to a single
// load/store instruction (the 16-byte one to ld/st.v2.u64 on NVIDIA and
// global_load/store_dwordx4 on AMD), so kernels choose the widest width that
// the alignment of every address allows, once per launch.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpu/host_device.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Widest unit any kernel uses.
constexpr size_t max_unit_width = 16;

struct alignas(16) Unit16 {
    uint64_t low;
    uint64_t high;
};

template <size_t Width> struct UnitOfWidth;
template <> struct UnitOfWidth<1> { using type = uint8_t; };
template <> struct UnitOfWidth<2> { using type = uint16_t; };
template <> struct UnitOfWidth<4> { using type = uint32_t; };
template <> struct UnitOfWidth<8> { using type = uint64_t; };
template <> struct UnitOfWidth<16> { using type = Unit16; };

/// The unit type of `Width` bytes.
template <size_t Width> using unit_t = typename UnitOfWidth<Width>::type;

/// Largest power of two, at most 16, dividing `value` (16 for zero).
constexpr size_t alignment_of(uint64_t value) {
    size_t alignment = max_unit_width;
    while (alignment > 1 && value % alignment != 0) {
        alignment /= 2;
    }
    return alignment;
}

inline size_t alignment_of(const void* pointer) {
    return alignment_of(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)));
}

/// Calls `function(std::integral_constant<size_t, Width>)` for every unit
/// width with_unit_width dispatches to.
template <class Function> void for_each_unit_width(Function&& function) {
    function(std::integral_constant<size_t, 16>{});
    function(std::integral_constant<size_t, 8>{});
    function(std::integral_constant<size_t, 4>{});
    function(std::integral_constant<size_t, 2>{});
    function(std::integral_constant<size_t, 1>{});
}

/// Calls `function(std::integral_constant<size_t, W>{})` with W == `width`,
/// which must be 1, 2, 4, 8 or 16: turns a width chosen at run time into a
/// kernel template argument in exactly one place.
template <class Function> void with_unit_width(size_t width, Function&& function) {
    switch (width) {
    case 16: function(std::integral_constant<size_t, 16>{}); return;
    case 8: function(std::integral_constant<size_t, 8>{}); return;
    case 4: function(std::integral_constant<size_t, 4>{}); return;
    case 2: function(std::integral_constant<size_t, 2>{}); return;
    default: function(std::integral_constant<size_t, 1>{}); return;
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
