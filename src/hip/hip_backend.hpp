#pragma once
// The HIP backend: AMD GPUs (kDLROCM; also the memory backend of kDLROCMHost).

#include "base/backend.hpp"
#include "base/host_tasks.hpp"

namespace mtsarray::detail {

/// The process-wide instance (only defined when MTSARRAY_HAS_HIP), made on
/// the first call: long move_data plans are built on `host_tasks`.
const Backend& hip_backend(const HostTasks& host_tasks);

}  // namespace mtsarray::detail
