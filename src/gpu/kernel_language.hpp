#pragma once
// The one place src/gpu learns which GPU compiler it is under. Kernels use
// only what CUDA and HIP share (__global__, __shared__, threadIdx, dim3,
// __syncthreads, <<<>>>); the runtime API itself is never called from src/gpu
// (src/cuda and src/hip own every runtime call).

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#error "src/gpu headers hold kernels: compile them with nvcc (src/cuda) or hipcc (src/hip)"
#endif
