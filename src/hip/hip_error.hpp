#pragma once
// The HIP runtime's error vocabulary for src/gpu/runtime_error.hpp, and the
// macros that check HIP calls with it: a failed call throws mtsarray::Error
// (OutOfMemory for an allocation failure) naming file:line, the call and
// HIP's error name and string; the no-throw form reports on stderr.

#include <hip/hip_runtime_api.h>

#include "gpu/runtime_error.hpp"

/// Throws unless `call` returns hipSuccess.
#define MTSARRAY_HIP_CHECK(call) \
    ::mtsarray::detail::gpu::check<::mtsarray::detail::hip::HipErrors>((call), #call, __FILE__, __LINE__)

/// Reports on stderr unless `call` returns hipSuccess; evaluates to whether
/// it did. Never throws.
#define MTSARRAY_HIP_CHECK_NOTHROW(call) \
    ::mtsarray::detail::gpu::check_nothrow<::mtsarray::detail::hip::HipErrors>((call), #call, __FILE__, __LINE__)

namespace mtsarray::detail {
namespace hip {

struct HipErrors {
    using Status = hipError_t;
    static constexpr const char* display_name = "HIP";
    static constexpr Status success = hipSuccess;
    static constexpr Status out_of_memory = hipErrorOutOfMemory;
    static const char* name(Status status) noexcept { return hipGetErrorName(status); }
    static const char* description(Status status) noexcept { return hipGetErrorString(status); }
    static Status last_error() noexcept { return hipGetLastError(); }
    /// hipErrorDeinitialized: the runtime has been torn down (the process is
    /// exiting): it releases everything itself, there is nothing to report.
    static bool is_silent(Status status) noexcept { return status == hipErrorDeinitialized; }
    /// A fault in a kernel, after which every call fails (cuda_error.hpp).
    /// hipError_t (ROCm 5's hip_runtime_api.h, HIP's "HIP error codes"
    /// reference) has no counterpart of CUDA's other process-fatal errors
    /// (cudaErrorContained, cudaErrorMpsClientTerminated,
    /// cudaErrorExternalDevice, cudaErrorTensorMemoryLeak) nor of its finer
    /// kernel faults (cudaErrorInvalidPc, ...): these four are the kernel
    /// faults it has.
    static bool is_sticky(Status status) noexcept {
        return status == hipErrorIllegalAddress || status == hipErrorLaunchTimeOut || status == hipErrorAssert ||
               status == hipErrorLaunchFailure;
    }
};

/// "hipErrorNoDevice" (ROCm 5 has no separate description).
inline std::string error_text(hipError_t status) { return gpu::error_text<HipErrors>(status); }

}  // namespace hip
}  // namespace mtsarray::detail
