// The CUDA backend: GpuBackend (src/gpu) instantiated with the CUDA runtime
// traits. This is the only translation unit nvcc compiles for mtsarray.

#include "cuda/cuda_backend.hpp"
#include "gpu/gpu_backend.hpp"
#include "cuda/cuda_runtime.hpp"

namespace mtsarray::detail {

const Backend& cuda_backend(const HostTasks& host_tasks) {
    // Never destroyed: at exit the static CUDA runtime may be torn down
    // before this object, and the pools it owns would free into a dead
    // runtime.
    static const Backend* const backend = new gpu::GpuBackend<cuda::CudaRuntime>(&host_tasks);
    return *backend;
}

}  // namespace mtsarray::detail
