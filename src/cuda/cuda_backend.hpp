#pragma once
// The CUDA backend: NVIDIA GPUs (kDLCUDA; also the memory backend of kDLCUDAHost and kDLCUDAManaged).

#include "base/backend.hpp"

namespace mtsarray::detail {

/// The process-wide instance (only defined when MTSARRAY_HAS_CUDA).
const Backend& cuda_backend();

}  // namespace mtsarray::detail
