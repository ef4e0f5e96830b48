#pragma once
// Checking CUDA runtime calls (after RMM's error macros): a failed call
// throws mtsarray::Error, or mtsarray::OutOfMemory for an allocation failure,
// with file:line, the call, and the runtime's own error name and string; the
// no-throw form reports on stderr, for destructors and deleters.

#include <cstdio>
#include <string>

#include <cuda_runtime_api.h>

#include "../error.hpp"

/// Throws unless `call` returns cudaSuccess.
#define MTSARRAY_CUDA_CHECK(call) ::mtsarray::cuda::check((call), #call, __FILE__, __LINE__)

/// Reports on stderr unless `call` returns cudaSuccess; evaluates to whether
/// it did. Never throws.
#define MTSARRAY_CUDA_CHECK_NOTHROW(call) \
    ::mtsarray::cuda::check_nothrow((call), #call, __FILE__, __LINE__)

namespace mtsarray {
namespace cuda {

/// "cudaErrorInvalidValue: invalid argument"
inline std::string error_text(cudaError_t status) {
    return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

/// Throws the exception for a failed `what` (a call, or a description).
[[noreturn]] inline void throw_error(cudaError_t status, const char* what, const char* file,
                                     int line) {
    // Reset the runtime's last-error state so that a later, unrelated check
    // does not report this failure again (sticky errors stay regardless).
    (void)cudaGetLastError();
    const std::string message = "CUDA error at " + std::string(file) + ":" +
                                std::to_string(line) + ": " + what + " failed with " +
                                error_text(status);
    if (status == cudaErrorMemoryAllocation) {
        throw OutOfMemory(message);
    }
    throw Error(message);
}

inline void check(cudaError_t status, const char* what, const char* file, int line) {
    if (status != cudaSuccess) {
        throw_error(status, what, file, line);
    }
}

inline bool check_nothrow(cudaError_t status, const char* what, const char* file,
                          int line) noexcept {
    if (status == cudaSuccess) {
        return true;
    }
    (void)cudaGetLastError();
    // At process exit the runtime may be unloaded before our last frees: it
    // releases everything itself then, so there is nothing to report.
    if (status != cudaErrorCudartUnloading) {
        std::fprintf(stderr, "mtsarray: CUDA error at %s:%d: %s failed with %s: %s\n", file, line,
                     what, cudaGetErrorName(status), cudaGetErrorString(status));
    }
    return false;
}

}  // namespace cuda
}  // namespace mtsarray
