// A deliberately slow kernel for the stream-ordering tests: it spins for a
// given number of clock cycles, then fills the buffer. A consumer that reads
// the buffer on another stream without waiting on an event sees the old
// values; one that waits correctly sees the new ones.

#include "support/cuda_slow_kernel.hpp"

namespace {

__global__ void spin_then_fill(double* data, size_t count, double value, long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t(blockDim.x) * gridDim.x) {
        data[i] = value;
    }
}

__global__ void hold_until_released(const volatile int* released, long long max_cycles) {
    const long long start = clock64();
    while (*released == 0 && clock64() - start < max_cycles) {
    }
}

}  // namespace

cudaError_t launch_hold_until_released(const volatile int* released, long long max_cycles, cudaStream_t stream) {
    hold_until_released<<<1, 1, 0, stream>>>(released, max_cycles);
    return cudaGetLastError();
}

cudaError_t launch_spin_then_fill(double* data, size_t count, double value, long long cycles, cudaStream_t stream) {
    spin_then_fill<<<64, 256, 0, stream>>>(data, count, value, cycles);
    return cudaGetLastError();
}
