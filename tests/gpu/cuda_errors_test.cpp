// The CUDA runtime's process-fatal errors (src/cuda/cuda_error.hpp): every
// cudaError_t whose documentation ("Data types used by CUDA Runtime", CUDA
// 13.0's driver_types.h) says "To continue using CUDA, the process must be
// terminated and relaunched" is a device fault, and the errors a process
// recovers from are not. The codes are spelled as numbers: the newest
// (cudaErrorContained, cudaErrorTensorMemoryLeak) are not in every toolkit
// the library builds with.

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include "cuda/cuda_error.hpp"
#include "support/simulated_runtime.hpp"

namespace {

using mtsarray::detail::cuda::CudaErrors;
using mtsarray_test::SimulatedErrors;
namespace sim = mtsarray_test::sim;

cudaError_t code(int value) { return static_cast<cudaError_t>(value); }

TEST(CudaErrors, EveryErrorAfterWhichTheProcessMustBeRelaunchedIsAFault) {
    const struct {
        int value;
        const char* name;
    } fatal[] = {
        {226, "cudaErrorContained"},          {700, "cudaErrorIllegalAddress"},
        {702, "cudaErrorLaunchTimeout"},      {710, "cudaErrorAssert"},
        {714, "cudaErrorHardwareStackError"}, {715, "cudaErrorIllegalInstruction"},
        {716, "cudaErrorMisalignedAddress"},  {717, "cudaErrorInvalidAddressSpace"},
        {718, "cudaErrorInvalidPc"},          {719, "cudaErrorLaunchFailure"},
        {721, "cudaErrorTensorMemoryLeak"},   {810, "cudaErrorMpsClientTerminated"},
        {911, "cudaErrorExternalDevice"},
    };
    for (const auto& error : fatal) {
        EXPECT_TRUE(CudaErrors::is_sticky(code(error.value))) << error.name << " (" << error.value << ")";
    }
    // errors a process recovers from
    for (const cudaError_t recoverable : {cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                                          cudaErrorNotReady, cudaErrorStreamCaptureInvalidated,
                                          cudaErrorMpsServerNotReady, cudaErrorCudartUnloading}) {
        EXPECT_FALSE(CudaErrors::is_sticky(recoverable)) << static_cast<int>(recoverable);
    }
}

// The simulated runtime's faults are CUDA's: each status it models is sticky
// exactly when the CUDA error it stands for is.
TEST(CudaErrors, TheSimulationsFaultsAreCudasFaults) {
    const struct {
        sim::Status status;
        cudaError_t cuda;
    } pairs[] = {
        {sim::Status::illegal_address, cudaErrorIllegalAddress},
        {sim::Status::mps_client_terminated, code(810)},
        {sim::Status::external_device, code(911)},
        {sim::Status::invalid_value, cudaErrorInvalidValue},
        {sim::Status::not_ready, cudaErrorNotReady},
        {sim::Status::memory_allocation, cudaErrorMemoryAllocation},
        {sim::Status::capture_invalidated, cudaErrorStreamCaptureInvalidated},
        {sim::Status::runtime_unloading, cudaErrorCudartUnloading},
    };
    for (const auto& pair : pairs) {
        EXPECT_EQ(SimulatedErrors::is_sticky(pair.status), CudaErrors::is_sticky(pair.cuda))
            << SimulatedErrors::name(pair.status);
    }
}

}  // namespace
