// The HIP backend: GpuBackend (src/gpu) instantiated with the ROCm runtime
// traits. This is the only translation unit the HIP compiler builds for
// mtsarray.

#include "hip/hip_backend.hpp"
#include "gpu/gpu_backend.hpp"
#include "hip/hip_runtime.hpp"

namespace mtsarray::detail {

const Backend& hip_backend(const HostTasks& host_tasks) {
    // Never destroyed, like the CUDA backend: the pools it owns must not
    // free into a runtime that exit() may already have torn down.
    static const Backend* const backend = new gpu::GpuBackend<hip::HipRuntime>(&host_tasks);
    return *backend;
}

}  // namespace mtsarray::detail
