#pragma once
// The CUDA backend: NVIDIA GPUs (kDLCUDA; also the memory backend of kDLCUDAHost and kDLCUDAManaged).

#include "base/backend.hpp"
#include "base/host_tasks.hpp"

namespace mtsarray::detail {

/// The process-wide instance (only defined when MTSARRAY_HAS_CUDA), made on
/// the first call: long move_data plans are built on `host_tasks`.
const Backend& cuda_backend(const HostTasks& host_tasks);

}  // namespace mtsarray::detail
