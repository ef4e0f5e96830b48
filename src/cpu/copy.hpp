#pragma once
#include <cstddef>

namespace mtsarray::detail::cpu {

/// memcpy of `bytes` bytes between two host buffers that do not overlap,
/// cut into pieces for up to `threads` threads (parallel_split.hpp).
void copy(void* destination, const void* source, size_t bytes, size_t threads);

}  // namespace mtsarray::detail::cpu
