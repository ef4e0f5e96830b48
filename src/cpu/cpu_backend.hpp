#pragma once
// The CPU backend: host memory (kDLCPU, and the host-accessible kDLCUDAHost, kDLCUDAManaged, kDLROCMHost).

#include "base/backend.hpp"

namespace mtsarray::detail {

/// The process-wide instance.
const Backend& cpu_backend();

}  // namespace mtsarray::detail
