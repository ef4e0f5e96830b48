// The no-device path, for every GPU backend compiled into this build: on a
// machine without the GPU (CI's), the library loads, says why the backend
// can not be used, refuses every way of making or reaching such an array
// with that reason, and keeps working on the CPU. On a machine with the GPU
// these tests skip: the contract suite covers it there.

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "mtsarray/config.h"

namespace {

using namespace mtsarray_test;

struct GpuFamily {
    const char* name;
    DLDeviceType device;
    DLDeviceType pinned;
    const char* vendor;  // as the probe names it in its messages
};

[[maybe_unused]] std::vector<GpuFamily> compiled_families() {
    std::vector<GpuFamily> families;
#if MTSARRAY_HAS_CUDA
    families.push_back({"cuda", kDLCUDA, kDLCUDAHost, "CUDA"});
#endif
#if MTSARRAY_HAS_HIP
    families.push_back({"rocm", kDLROCM, kDLROCMHost, "ROCm"});
#endif
    return families;
}

class NoDevice : public ::testing::TestWithParam<GpuFamily> {
protected:
    void SetUp() override {
        if (backend_available(GetParam().device)) {
            GTEST_SKIP() << "a " << GetParam().vendor << " device is present: the contract suite runs on it";
        }
        reason_ = mtsarray_backend_unavailable_reason(GetParam().device);
    }
    std::string reason_;
};

TEST_P(NoDevice, TheProbeNamesTheCause) {
    // "no CUDA driver found (...)", "no CUDA device", "no ROCm driver found: ..."
    EXPECT_NE(reason_.find(std::string("no ") + GetParam().vendor), std::string::npos) << reason_;
    bool available = true;
    ASSERT_EQ(mtsarray_backend_available(GetParam().device, &available), MTS_SUCCESS);
    EXPECT_FALSE(available);
    // the host-accessible memory of that runtime needs the runtime too
    ASSERT_EQ(mtsarray_backend_available(GetParam().pinned, &available), MTS_SUCCESS);
    EXPECT_FALSE(available);
    // and counts no device, for either type
    for (DLDeviceType type : {GetParam().device, GetParam().pinned}) {
        int32_t count = -1;
        ASSERT_EQ(mtsarray_device_count(type, &count), MTS_SUCCESS) << last_error();
        EXPECT_EQ(count, 0);
    }
}

TEST_P(NoDevice, MakingArraysFailsWithTheReason) {
    const std::vector<uintptr_t> shape = {4, 3};
    for (DLDeviceType type : {GetParam().device, GetParam().pinned}) {
        mts_array_t array = {};
        ASSERT_NE(mtsarray_zeros(DLDevice{type, 0}, float64(), shape.data(), shape.size(), &array), MTS_SUCCESS);
        EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();
        EXPECT_EQ(array.ptr, nullptr) << "the output must stay untouched";

        const double value = 1.0;
        ASSERT_NE(mtsarray_full(DLDevice{type, 0}, float64(), shape.data(), shape.size(), &value, &array), MTS_SUCCESS);
        EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();

        double host[12] = {};
        bool deleted = false;
        ASSERT_NE(mtsarray_wrap(host, DLDevice{type, 0}, float64(), shape.data(), shape.size(),
                                [](void* flag) { *static_cast<bool*>(flag) = true; }, &deleted, &array),
                  MTS_SUCCESS);
        EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();
        EXPECT_FALSE(deleted) << "a failed wrap leaves the memory (and its deleter) with the caller";
    }
}

TEST_P(NoDevice, CpuArraysCanNotReachTheDeviceButKeepWorking) {
    auto array = mtsarray::Array::full(mtsarray::cpu(), {2, 3}, 2.5);
    const DLDevice gpu = {GetParam().device, 0};

    mts_array_t copy = {};
    ASSERT_NE(array.get().copy(array.get().ptr, gpu, &copy), MTS_SUCCESS);
    EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();

    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_NE(array.get().as_dlpack(array.get().ptr, &tensor, gpu, nullptr, dlpack_version()), MTS_SUCCESS);
    EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();
    EXPECT_EQ(tensor, nullptr);

    // and the CPU array is intact and usable
    auto values = from_bytes<double>(read_bytes(array));
    EXPECT_EQ(values, std::vector<double>(6, 2.5));
    auto copied = array.copy(mtsarray::cpu());
    EXPECT_EQ(from_bytes<double>(read_bytes(copied)), values);
}

TEST_P(NoDevice, ImportingADeviceTensorFailsAndReleasesIt) {
    static int deleted = 0;
    deleted = 0;
    int64_t shape[1] = {3};
    auto* tensor = new DLManagedTensorVersioned{};
    tensor->version = dlpack_version();
    tensor->deleter = [](DLManagedTensorVersioned* self) {
        deleted++;
        delete self;
    };
    tensor->dl_tensor.data = reinterpret_cast<void*>(0x1000);  // never read
    tensor->dl_tensor.device = DLDevice{GetParam().device, 0};
    tensor->dl_tensor.ndim = 1;
    tensor->dl_tensor.dtype = float64();
    tensor->dl_tensor.shape = shape;

    mts_array_t array = {};
    ASSERT_NE(mtsarray_from_dlpack(tensor, &array), MTS_SUCCESS);
    EXPECT_NE(last_error().find(reason_), std::string::npos) << last_error();
    EXPECT_EQ(deleted, 1) << "the tensor is ours even when the import fails";
}

TEST_P(NoDevice, StreamRulesAreStillEnforced) {
    // the rules need no device: a bad number is rejected before any probe
    auto array = mtsarray::Array::zeros(mtsarray::cpu(), float32(), {2});
    DLManagedTensorVersioned* tensor = nullptr;
    const int64_t bad = GetParam().device == kDLCUDA ? 0 : 1;
    ASSERT_NE(array.get().as_dlpack(array.get().ptr, &tensor, DLDevice{GetParam().device, 0}, &bad, dlpack_version()),
              MTS_SUCCESS);
    EXPECT_FALSE(last_error().empty());
}

[[maybe_unused]] std::string family_name(const ::testing::TestParamInfo<GpuFamily>& info) {
    return info.param.name;
}

}  // namespace

#if MTSARRAY_HAS_CUDA || MTSARRAY_HAS_HIP
INSTANTIATE_TEST_SUITE_P(CompiledGpuBackends, NoDevice, ::testing::ValuesIn(compiled_families()), family_name);
#else
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NoDevice);
#endif
