#pragma once
// MTSARRAY_HOST_DEVICE marks the few functions of src/gpu that run both in
// kernels and on the host: the table's packing and the per-thread bodies of
// the kernels, which the unit tests run on the CPU, thread by thread, to
// check the index arithmetic against a reference without a GPU. Plain C++
// compilers see nothing.

#if defined(__CUDACC__) || defined(__HIPCC__)
#include "gpu/kernel_language.hpp"
#define MTSARRAY_HOST_DEVICE __host__ __device__
#else
#define MTSARRAY_HOST_DEVICE
#endif
