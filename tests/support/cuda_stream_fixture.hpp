#pragma once
// The fixture of the CUDA stream suites (cuda_streams.cpp,
// cuda_no_host_block.cpp): every test runs on the legacy default stream
// (DLPack number 1), the per-thread default stream (2) and a user stream (a
// cudaStream_t handle), as RMM runs its tests, with a second, non-blocking
// stream at hand for consumers and other arrays. Skips with the probe's
// reason when no GPU is present.

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/backends.hpp"

namespace mtsarray_test {

enum class StreamKind { legacy, per_thread, user };

inline void PrintTo(StreamKind kind, std::ostream* stream) {
    *stream << (kind == StreamKind::legacy ? "legacy" : kind == StreamKind::per_thread ? "per_thread" : "user");
}

/// Test names: ".../legacy", ".../per_thread", ".../user".
inline std::string stream_kind_name(const ::testing::TestParamInfo<StreamKind>& info) {
    std::stringstream name;
    PrintTo(info.param, &name);
    return name.str();
}

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t status_ = (call);                                                     \
        ASSERT_EQ(status_, cudaSuccess) << #call << ": " << cudaGetErrorString(status_);  \
    } while (false)

class CudaStreamTest : public ::testing::TestWithParam<StreamKind> {
protected:
    void SetUp() override {
        MTSARRAY_SKIP_UNLESS_AVAILABLE((DLDevice{kDLCUDA, 0}));
        switch (GetParam()) {
        case StreamKind::legacy:
            number_ = 1;
            stream_ = cudaStreamLegacy;
            break;
        case StreamKind::per_thread:
            number_ = 2;
            stream_ = cudaStreamPerThread;
            break;
        case StreamKind::user:
            CUDA_CHECK(cudaStreamCreateWithFlags(&user_, cudaStreamNonBlocking));
            number_ = static_cast<int64_t>(reinterpret_cast<intptr_t>(user_));
            stream_ = user_;
            break;
        }
        CUDA_CHECK(cudaStreamCreateWithFlags(&other_, cudaStreamNonBlocking));
    }

    void TearDown() override {
        // the arrays of a test are gone by now; their frees are queued on
        // these streams and complete before the streams are released
        cudaDeviceSynchronize();
        if (user_ != nullptr) {
            cudaStreamDestroy(user_);
        }
        if (other_ != nullptr) {
            cudaStreamDestroy(other_);
        }
    }

    /// The DLPack number of the second stream.
    int64_t other_number() const { return static_cast<int64_t>(reinterpret_cast<intptr_t>(other_)); }

    int64_t number_ = 0;             // the stream under test, as a DLPack number
    cudaStream_t stream_ = nullptr;  // the same, as a CUDA handle
    cudaStream_t user_ = nullptr;
    cudaStream_t other_ = nullptr;   // non-blocking, for consumers and other arrays
};

}  // namespace mtsarray_test
