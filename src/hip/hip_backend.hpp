#pragma once
// The HIP backend: AMD GPUs (kDLROCM; also the memory backend of kDLROCMHost).

#include "base/backend.hpp"

namespace mtsarray::detail {

/// The process-wide instance (only defined when MTSARRAY_HAS_HIP).
const Backend& hip_backend();

}  // namespace mtsarray::detail
