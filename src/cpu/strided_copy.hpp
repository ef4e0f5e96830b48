#pragma once
#include "backend.hpp"

namespace mtsarray::detail::cpu {

/// Copies `source` into the C-contiguous `destination`. Axes that are
/// contiguous in the source are merged first; then rows are memcpy'd when
/// the innermost axis is contiguous, and otherwise the copy is a blocked
/// (cache-tiled) transpose between the innermost destination axis and the
/// source's most contiguous axis.
void strided_copy(void* destination, const StridedView& source);

}  // namespace mtsarray::detail::cpu
