// DLPack stream numbers: src/base/stream.cpp's rules tested directly (this test
// links the library's own objects), then the same rules through the public
// API (mtsarray_set_stream / get_stream, as_dlpack).

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mtsarray.h"
#include "base/stream.hpp"
#include "base/error.hpp"

using mtsarray::detail::Stream;

// readable parameters; DLDevice lives in the global namespace
inline void PrintTo(const DLDevice& device, std::ostream* stream) {
    *stream << static_cast<int>(device.device_type) << ":" << device.device_id;
}

namespace {

constexpr DLDevice cuda0 = {kDLCUDA, 0};
constexpr DLDevice cuda1 = {kDLCUDA, 1};
constexpr DLDevice rocm0 = {kDLROCM, 0};
constexpr DLDevice cpu = {kDLCPU, 0};
constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();
constexpr int64_t int64_min = std::numeric_limits<int64_t>::min();

std::string parse_error(DLDevice device, int64_t number, bool allow_none = false) {
    try {
        Stream::parse(device, number, allow_none);
    } catch (const mtsarray::detail::Error& error) {
        return error.what();
    }
    return "accepted";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(StreamParse, Cuda) {
    for (bool allow_none : {false, true}) {
        for (int64_t number : {int64_t(1), int64_t(2), int64_t(3), int64_t(4096), int64_max}) {
            auto stream = Stream::parse(cuda0, number, allow_none);
            EXPECT_EQ(stream.number(), number);
            EXPECT_EQ(stream.device().device_type, kDLCUDA);
            EXPECT_FALSE(stream.is_none());
            EXPECT_EQ(stream.is_handle(), number > 2);
        }
        auto zero = parse_error(cuda0, 0, allow_none);
        EXPECT_EQ(zero, "invalid DLPack stream number 0 for cuda:0: 0 is ambiguous for CUDA, use 1 (legacy default "
                        "stream), 2 (per-thread default stream) or a cudaStream_t handle");
        for (int64_t number : {int64_t(-2), int64_t(-100), int64_min}) {
            EXPECT_EQ(parse_error(cuda0, number, allow_none),
                      "invalid DLPack stream number " + std::to_string(number) +
                          " for cuda:0: negative stream numbers other than -1 are not valid");
        }
    }
    EXPECT_EQ(parse_error(cuda1, -1),
              "invalid DLPack stream number -1 for cuda:1: -1 (no synchronisation) is only valid in as_dlpack");
    auto none = Stream::parse(cuda1, -1, /*allow_none=*/true);
    EXPECT_TRUE(none.is_none());
    EXPECT_FALSE(none.is_handle());
    EXPECT_EQ(none.device().device_id, 1);
}

TEST(StreamParse, Rocm) {
    for (bool allow_none : {false, true}) {
        for (int64_t number : {int64_t(0), int64_t(3), int64_t(1) << 40, int64_max}) {
            auto stream = Stream::parse(rocm0, number, allow_none);
            EXPECT_EQ(stream.number(), number);
            EXPECT_EQ(stream.is_handle(), number > 2);
            EXPECT_FALSE(stream.is_none());
        }
        for (int64_t number : {int64_t(1), int64_t(2)}) {
            EXPECT_EQ(parse_error(rocm0, number, allow_none),
                      "invalid DLPack stream number " + std::to_string(number) +
                          " for rocm:0: 1 and 2 are not valid for ROCm, use 0 (default stream) or a hipStream_t "
                          "handle");
        }
        EXPECT_TRUE(contains(parse_error(rocm0, -2, allow_none), "negative stream numbers other than -1"));
        EXPECT_TRUE(contains(parse_error(rocm0, int64_min, allow_none), "negative stream numbers other than -1"));
    }
    EXPECT_TRUE(contains(parse_error(rocm0, -1), "-1 (no synchronisation) is only valid in as_dlpack"));
    EXPECT_TRUE(Stream::parse(rocm0, -1, true).is_none());
}

TEST(StreamParse, HostMemoryOnlyTakesMinusOne) {
    const std::vector<std::pair<DLDevice, std::string>> hosts = {
        {cpu, "cpu"},
        {{kDLCUDAHost, 0}, "cuda_host"},
        {{kDLROCMHost, 0}, "rocm_host"},
    };
    // managed memory takes CUDA stream numbers (CUDA rules), and has no stream of its own
    EXPECT_TRUE(Stream::parse({kDLCUDAManaged, 0}, 1).is_none());
    EXPECT_TRUE(contains(parse_error({kDLCUDAManaged, 0}, 0, true), "0 is ambiguous for CUDA"));
    for (const auto& host : hosts) {
        SCOPED_TRACE(host.second);
        // -1 is the "no stream" of host memory, with or without allow_none
        EXPECT_TRUE(Stream::parse(host.first, -1, false).is_none());
        EXPECT_TRUE(Stream::parse(host.first, -1, true).is_none());
        for (int64_t number : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_max}) {
            for (bool allow_none : {false, true}) {
                auto message = parse_error(host.first, number, allow_none);
                EXPECT_TRUE(contains(message, "invalid DLPack stream number " + std::to_string(number)));
                EXPECT_TRUE(contains(message, host.second + " memory has no streams, only -1 (or NULL) is valid"))
                    << message;
            }
        }
        EXPECT_TRUE(contains(parse_error(host.first, -2, true), "negative stream numbers other than -1"));
    }
    EXPECT_EQ(parse_error(cpu, 1),
              "invalid DLPack stream number 1 for cpu: cpu memory has no streams, only -1 (or NULL) is valid");
}

TEST(StreamParse, OtherDeviceTypes) {
    EXPECT_TRUE(contains(parse_error({kDLOpenCL, 0}, 3), "opencl memory has no streams"));
    EXPECT_TRUE(contains(parse_error({kDLVulkan, 2}, 0), "for vulkan:2"));
    EXPECT_TRUE(contains(parse_error({static_cast<DLDeviceType>(99), 0}, 1), "unknown device type 99"));
}

TEST(StreamDefaults, DefaultStreamOfEachDevice) {
    EXPECT_EQ(Stream::default_for(cuda0).number(), 1);
    EXPECT_EQ(Stream::default_for(cuda1).device().device_id, 1);
    EXPECT_EQ(Stream::default_for(rocm0).number(), 0);
    for (auto type : {kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost}) {
        EXPECT_TRUE(Stream::default_for({type, 0}).is_none());
    }
    EXPECT_EQ(Stream::default_for(cuda0), Stream::parse(cuda0, 1));
    EXPECT_NE(Stream::default_for(cuda0), Stream::default_for(cuda1));
    EXPECT_NE(Stream::parse(cuda0, 1), Stream::parse(cuda0, 2));
    EXPECT_NE(Stream::parse(cuda0, 3), Stream::parse(rocm0, 3));
}

TEST(StreamDescribe, NamesTheDeviceAndTheMeaning) {
    EXPECT_EQ(Stream::parse(cuda0, 1).describe(), "cuda:0 stream 1 (legacy default)");
    EXPECT_EQ(Stream::parse(cuda1, 2).describe(), "cuda:1 stream 2 (per-thread default)");
    EXPECT_EQ(Stream::parse(cuda0, 12345).describe(), "cuda:0 stream 12345");
    EXPECT_EQ(Stream::parse(cuda0, -1, true).describe(), "cuda:0 stream -1 (none)");
    EXPECT_EQ(Stream::parse(rocm0, 0).describe(), "rocm:0 stream 0 (default)");
    EXPECT_EQ(Stream::parse(rocm0, 7).describe(), "rocm:0 stream 7");
    EXPECT_EQ(Stream::default_for(cpu).describe(), "cpu stream -1 (none)");
    EXPECT_EQ(Stream::default_for({kDLCUDAHost, 0}).describe(), "cuda_host:0 stream -1 (none)");
}

TEST(StreamHandle, IsTheNumber) {
    auto stream = Stream::parse(cuda0, 0x7f00deadbeef);
    EXPECT_EQ(stream.handle(), reinterpret_cast<void*>(static_cast<intptr_t>(0x7f00deadbeef)));
}

// ---- the same rules through the public API -----------------------------------

std::string last_error() {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    return message == nullptr ? "" : message;
}

class PublicStreams : public ::testing::Test {
protected:
    void SetUp() override {
        const DLDataType float64 = {kDLFloat, 64, 1};
        const uintptr_t shape[] = {2, 3};
        ASSERT_EQ(mtsarray_zeros(cpu, float64, shape, 2, &array_), MTS_SUCCESS) << last_error();
    }
    void TearDown() override {
        if (array_.destroy != nullptr) {
            array_.destroy(array_.ptr);
        }
    }
    mts_array_t array_ = {};
};

TEST_F(PublicStreams, CpuArraysOnlyTakeMinusOne) {
    int64_t stream = 42;
    ASSERT_EQ(mtsarray_get_stream(&array_, &stream), MTS_SUCCESS) << last_error();
    EXPECT_EQ(stream, -1);
    EXPECT_EQ(mtsarray_set_stream(&array_, -1), MTS_SUCCESS) << last_error();

    for (int64_t number : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_t(-2)}) {
        ASSERT_EQ(mtsarray_set_stream(&array_, number), MTS_CALLBACK_ERROR);
        EXPECT_TRUE(contains(last_error(), "mtsarray_set_stream: invalid DLPack stream number " +
                                               std::to_string(number) + " for cpu"))
            << last_error();
    }
    ASSERT_EQ(mtsarray_get_stream(&array_, &stream), MTS_SUCCESS);
    EXPECT_EQ(stream, -1);
    EXPECT_EQ(mtsarray_synchronize(&array_), MTS_SUCCESS) << last_error();
}

TEST_F(PublicStreams, AsDlpackOnCpu) {
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    for (const int64_t* stream : {static_cast<const int64_t*>(nullptr), &mtsarray::detail::stream_numbers::none}) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(array_.as_dlpack(array_.ptr, &tensor, cpu, stream, version), MTS_SUCCESS) << last_error();
        ASSERT_NE(tensor, nullptr);
        tensor->deleter(tensor);
    }
    for (int64_t number : {int64_t(0), int64_t(1), int64_t(2), int64_t(5), int64_t(-2)}) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(array_.as_dlpack(array_.ptr, &tensor, cpu, &number, version), MTS_CALLBACK_ERROR);
        EXPECT_EQ(tensor, nullptr);
        EXPECT_TRUE(contains(last_error(), "as_dlpack"));
        EXPECT_TRUE(contains(last_error(), "invalid DLPack stream number " + std::to_string(number) + " for cpu"))
            << last_error();
    }
}

TEST_F(PublicStreams, ArgumentErrors) {
    ASSERT_EQ(mtsarray_get_stream(&array_, nullptr), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(contains(last_error(), "mtsarray_get_stream: stream is NULL")) << last_error();
    mts_array_t foreign = {};
    int64_t stream = 0;
    ASSERT_EQ(mtsarray_get_stream(&foreign, &stream), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(contains(last_error(), "array was not made by mtsarray")) << last_error();
    ASSERT_EQ(mtsarray_set_stream(nullptr, -1), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(contains(last_error(), "mtsarray_set_stream: array is NULL")) << last_error();
    ASSERT_EQ(mtsarray_synchronize(&foreign), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(contains(last_error(), "mtsarray_synchronize")) << last_error();
}

// GPU arrays: the device's rules, through set_stream/get_stream. Only the
// library's named streams are used here (a user stream needs the runtime).
class GpuStreams : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override {
        bool available = false;
        ASSERT_EQ(mtsarray_backend_available(GetParam().device_type, &available), MTS_SUCCESS);
        if (!available) {
            GTEST_SKIP() << mtsarray_backend_unavailable_reason(GetParam().device_type);
        }
        const DLDataType float32 = {kDLFloat, 32, 1};
        const uintptr_t shape[] = {4, 4};
        ASSERT_EQ(mtsarray_zeros(GetParam(), float32, shape, 2, &array_), MTS_SUCCESS) << last_error();
    }
    void TearDown() override {
        if (array_.destroy != nullptr) {
            array_.destroy(array_.ptr);
        }
    }
    int64_t stream() {
        int64_t number = 1234567;
        EXPECT_EQ(mtsarray_get_stream(&array_, &number), MTS_SUCCESS) << last_error();
        return number;
    }
    mts_array_t array_ = {};
};

std::vector<DLDevice> gpu_devices() {
    std::vector<DLDevice> devices;
    devices.push_back(cuda0);
    devices.push_back(rocm0);
    return devices;
}

INSTANTIATE_TEST_SUITE_P(GpuBackends, GpuStreams, ::testing::ValuesIn(gpu_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) {
                             return std::string(info.param.device_type == kDLCUDA ? "cuda" : "rocm");
                         });

TEST_P(GpuStreams, SetAndGetFollowTheDeviceRules) {
    const bool cuda = GetParam().device_type == kDLCUDA;
    EXPECT_EQ(stream(), cuda ? 1 : 0);
    const std::vector<int64_t> valid = cuda ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{0};
    const std::vector<int64_t> invalid =
        cuda ? std::vector<int64_t>{0, -1, -2} : std::vector<int64_t>{1, 2, -1, -2};
    for (auto number : valid) {
        ASSERT_EQ(mtsarray_set_stream(&array_, number), MTS_SUCCESS) << last_error();
        EXPECT_EQ(stream(), number);
        EXPECT_EQ(mtsarray_synchronize(&array_), MTS_SUCCESS) << last_error();
    }
    const int64_t before = stream();
    for (auto number : invalid) {
        ASSERT_EQ(mtsarray_set_stream(&array_, number), MTS_CALLBACK_ERROR) << number;
        EXPECT_TRUE(contains(last_error(), "invalid DLPack stream number " + std::to_string(number)))
            << last_error();
        EXPECT_EQ(stream(), before);
    }
}

TEST_P(GpuStreams, AsDlpackOnTheDeviceFollowsTheRules) {
    const bool cuda = GetParam().device_type == kDLCUDA;
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    const std::vector<int64_t> valid = cuda ? std::vector<int64_t>{1, 2, -1} : std::vector<int64_t>{0, -1};
    const std::vector<int64_t> invalid = cuda ? std::vector<int64_t>{0, -2} : std::vector<int64_t>{1, 2, -2};
    for (auto number : valid) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(array_.as_dlpack(array_.ptr, &tensor, GetParam(), &number, version), MTS_SUCCESS) << last_error();
        EXPECT_EQ(tensor->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
        tensor->deleter(tensor);
    }
    for (auto number : invalid) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(array_.as_dlpack(array_.ptr, &tensor, GetParam(), &number, version), MTS_CALLBACK_ERROR);
        EXPECT_TRUE(contains(last_error(), "invalid DLPack stream number " + std::to_string(number)))
            << last_error();
    }
    // a CPU consumer of a GPU array: only NULL / -1
    int64_t one = 1;
    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_EQ(array_.as_dlpack(array_.ptr, &tensor, cpu, &one, version), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(contains(last_error(), "for cpu")) << last_error();
}

}  // namespace
