#pragma once
// The CUDA runtime's error vocabulary for src/gpu/runtime_error.hpp, and the
// macros that check CUDA calls with it: a failed call throws mtsarray::Error
// (OutOfMemory for an allocation failure) naming file:line, the call and
// CUDA's error name and string; the no-throw form reports on stderr.

#include <cuda_runtime_api.h>

#include "gpu/runtime_error.hpp"

/// Throws unless `call` returns cudaSuccess.
#define MTSARRAY_CUDA_CHECK(call) \
    ::mtsarray::detail::gpu::check<::mtsarray::detail::cuda::CudaErrors>((call), #call, __FILE__, __LINE__)

/// Reports on stderr unless `call` returns cudaSuccess; evaluates to whether
/// it did. Never throws.
#define MTSARRAY_CUDA_CHECK_NOTHROW(call)                                                    \
    ::mtsarray::detail::gpu::check_nothrow<::mtsarray::detail::cuda::CudaErrors>((call), #call, __FILE__, \
                                                                 __LINE__)

namespace mtsarray::detail {
namespace cuda {

struct CudaErrors {
    using Status = cudaError_t;
    static constexpr const char* display_name = "CUDA";
    static constexpr Status success = cudaSuccess;
    static constexpr Status out_of_memory = cudaErrorMemoryAllocation;
    static const char* name(Status status) noexcept { return cudaGetErrorName(status); }
    static const char* description(Status status) noexcept { return cudaGetErrorString(status); }
    static Status last_error() noexcept { return cudaGetLastError(); }
    /// At process exit the runtime may be unloaded before our last frees
    /// (cudaErrorCudartUnloading: "called during process shut down, at a
    /// point in time after CUDA driver has been unloaded"): it releases
    /// everything itself then, so there is nothing to report.
    static bool is_silent(Status status) noexcept { return status == cudaErrorCudartUnloading; }
    /// The errors after which, in the Runtime API's words for each of them
    /// ("Data types used by CUDA Runtime", CUDA 13.0), "the process must be
    /// terminated and relaunched" to continue using CUDA: the faults of a
    /// kernel ("This leaves the process in an inconsistent state and any
    /// further CUDA work will return the same error"), a contained hardware
    /// error, an error signalled by a device outside CUDA, and the MPS
    /// server terminating this client. The codes added after CUDA 11 are
    /// spelled as numbers, so that every toolkit the library builds with
    /// knows them.
    static bool is_sticky(Status status) noexcept {
        switch (static_cast<int>(status)) {
        case 226:  // cudaErrorContained
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchTimeout:
        case cudaErrorAssert:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorLaunchFailure:
        case 721:  // cudaErrorTensorMemoryLeak
        case 810:  // cudaErrorMpsClientTerminated
        case 911:  // cudaErrorExternalDevice
            return true;
        default: return false;
        }
    }
};

/// "cudaErrorInvalidValue: invalid argument"
inline std::string error_text(cudaError_t status) { return gpu::error_text<CudaErrors>(status); }

}  // namespace cuda
}  // namespace mtsarray::detail
