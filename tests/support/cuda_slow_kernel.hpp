#pragma once
#include <cstddef>

#include <cuda_runtime.h>

/// Queues on `stream` a kernel that spins for `cycles` clock cycles, then
/// writes `value` to the `count` doubles at `data`.
cudaError_t launch_spin_then_fill(double* data, size_t count, double value, long long cycles, cudaStream_t stream);

/// Queues on `stream` a kernel that spins until `*released` (page-locked,
/// mapped host memory) becomes non-zero, or `max_cycles` clock cycles have
/// passed: the stream is busy until the host says so, and a host that waits
/// for it instead of releasing it is not blocked for ever.
cudaError_t launch_hold_until_released(const volatile int* released, long long max_cycles, cudaStream_t stream);
