#pragma once
#include <cstddef>

#include <cuda_runtime.h>

/// Queues on `stream` a kernel that spins for `cycles` clock cycles, then
/// writes `value` to the `count` doubles at `data`.
cudaError_t launch_spin_then_fill(double* data, size_t count, double value, long long cycles, cudaStream_t stream);
