#pragma once
// MTSARRAY_HOST_DEVICE marks the functions of src/gpu that run both in
// kernels and on the host: the table's packing and the per-thread bodies of
// every kernel. A runtime whose kernels run on the host (the simulated
// runtime of the tests) runs these very bodies for every thread of the grid;
// the unit tests also run them thread by thread against a reference. Plain
// C++ compilers see nothing.
//
// MTSARRAY_DEVICE_COMPILER is 1 under nvcc and hipcc: only then do the
// `__global__` wrappers and their `<<<>>>` launches exist.

#if defined(__CUDACC__) || defined(__HIPCC__)
#include "gpu/kernel_language.hpp"
#define MTSARRAY_HOST_DEVICE __host__ __device__
#define MTSARRAY_DEVICE_COMPILER 1
#else
#define MTSARRAY_HOST_DEVICE
#define MTSARRAY_DEVICE_COMPILER 0
#endif

// Unrolls the loop that follows in device code (the host passes of nvcc and
// plain compilers do not know the pragma).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MTSARRAY_UNROLL _Pragma("unroll")
#else
#define MTSARRAY_UNROLL
#endif
