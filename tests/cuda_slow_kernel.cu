// A deliberately slow kernel for the stream-ordering tests: it spins for a
// given number of clock cycles, then fills the buffer. A consumer that reads
// the buffer on another stream without waiting on an event sees the old
// values; one that waits correctly sees the new ones.

#include "cuda_slow_kernel.hpp"

namespace {

__global__ void spin_then_fill(double* data, size_t count, double value, long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t(blockDim.x) * gridDim.x) {
        data[i] = value;
    }
}

}  // namespace

cudaError_t launch_spin_then_fill(double* data, size_t count, double value, long long cycles, cudaStream_t stream) {
    spin_then_fill<<<64, 256, 0, stream>>>(data, count, value, cycles);
    return cudaGetLastError();
}
