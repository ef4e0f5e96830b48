#pragma once
#include <cstddef>

namespace mtsarray::detail::cpu {

/// Writes `count` copies of the `element_size`-byte pattern `value` (1, 2,
/// 4, 8 or 16 bytes) to `data`, with loops the compiler vectorises, cut into
/// pieces for up to `threads` threads (parallel_split.hpp).
void fill(void* data, size_t count, const void* value, size_t element_size, size_t threads);

}  // namespace mtsarray::detail::cpu
