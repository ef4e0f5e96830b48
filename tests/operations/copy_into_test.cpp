// mtsarray_copy_into: every element of a source written into an array that
// already exists, for every pair of devices of this build (CPU and, when
// compiled in, the GPU and its page-locked and managed host memory), every
// dtype, empty and 0-d arrays, sources of other libraries (strided or not),
// overlapping views, and every error leaving the destination untouched.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "mtsarray.h"
#include "mtsarray.hpp"
#include "support/backends.hpp"
#include "support/strided_foreign_array.hpp"

using namespace mtsarray_test;

namespace {

/// The devices a copy may start or end on: the contract devices, and the
/// host memory types of the GPU backends compiled in.
std::vector<DLDevice> copy_devices() {
    std::vector<DLDevice> devices = test_devices();
    if (MTSARRAY_HAS_CUDA || simulated_gpu()) {
        // a second GPU (peer copies; the simulated runtime has two), and
        // the GPU's host memory types
        // (test_devices() lists it already where the runtime reports it)
        if (std::none_of(devices.begin(), devices.end(),
                         [](DLDevice d) { return d.device_type == kDLCUDA && d.device_id == 1; })) {
            devices.push_back(DLDevice{kDLCUDA, 1});
        }
        devices.push_back(DLDevice{kDLCUDAHost, 0});
        devices.push_back(DLDevice{kDLCUDAManaged, 0});
    }
#if MTSARRAY_HAS_HIP
    devices.push_back(DLDevice{kDLROCMHost, 0});
#endif
    return devices;
}

std::string copy_device_name(DLDevice device) {
    const std::string gpu = simulated_gpu() ? "sim" : "cuda";
    switch (device.device_type) {
    case kDLCUDAHost: return gpu + "host";
    case kDLCUDAManaged: return gpu + "managed";
    case kDLROCMHost: return "rocmhost";
    default: return device_name(device);
    }
}

mts_status_t copy_into(const mtsarray::Array& destination, const mts_array_t& source) {
    return mtsarray_copy_into(&destination.get(), &source);
}

class CopyInto : public ::testing::TestWithParam<std::tuple<DLDevice, DLDevice>> {
protected:
    void SetUp() override {
        // a machine with a single GPU has no peer to copy to
        MTSARRAY_SKIP_UNLESS_PRESENT(destination_device());
        MTSARRAY_SKIP_UNLESS_PRESENT(source_device());
    }
    DLDevice destination_device() const { return std::get<0>(GetParam()); }
    DLDevice source_device() const { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(EveryPairOfDevices, CopyInto,
                         ::testing::Combine(::testing::ValuesIn(copy_devices()), ::testing::ValuesIn(copy_devices())),
                         [](const ::testing::TestParamInfo<std::tuple<DLDevice, DLDevice>>& info) {
                             return copy_device_name(std::get<1>(info.param)) + "_to_" +
                                    copy_device_name(std::get<0>(info.param));
                         });

TEST_P(CopyInto, EveryDtypeAndShape) {
    std::mt19937_64 rng(7);
    const std::vector<std::vector<uintptr_t>> shapes = {{}, {0}, {1}, {3, 0, 2}, {5, 3}, {7, 2, 3}, {1000, 17}};
    for (const auto& dtype : all_dtypes()) {
        for (const auto& shape : shapes) {
            SCOPED_TRACE(std::string(dtype.name) + " of " + std::to_string(shape.size()) + " axes, " +
                         std::to_string(product(shape)) + " elements");
            const size_t bytes = product(shape) * element_size(dtype.dtype);
            const auto source_bytes = random_bytes(rng, bytes);
            const auto old_bytes = random_bytes(rng, bytes);
            auto source = array_from_bytes(source_device(), dtype.dtype, shape, source_bytes);
            auto destination = array_from_bytes(destination_device(), dtype.dtype, shape, old_bytes);
            ASSERT_EQ(copy_into(destination, source.get()), MTS_SUCCESS) << last_error();
            EXPECT_EQ(read_bytes(destination), source_bytes);
            EXPECT_EQ(read_bytes(source), source_bytes) << "copy_into changed its source";
        }
    }
}

TEST_P(CopyInto, LargeArrays) {
    // several MiB: the host's threads, and the GPU's large-copy paths
    std::mt19937_64 rng(11);
    const std::vector<uintptr_t> shape = {1 << 20, 3};
    const auto source_bytes = random_bytes(rng, product(shape) * 4);
    auto source = array_from_bytes(source_device(), float32(), shape, source_bytes);
    auto destination = mtsarray::Array::zeros(destination_device(), float32(), shape);
    ASSERT_EQ(copy_into(destination, source.get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(destination), source_bytes);
}

TEST_P(CopyInto, TheSourceMayGoAtOnce) {
    // the copy is queued; destroying the source right after must not free
    // what it still reads
    std::mt19937_64 rng(13);
    const std::vector<uintptr_t> shape = {4096, 8};
    const auto source_bytes = random_bytes(rng, product(shape) * 8);
    auto destination = mtsarray::Array::zeros(destination_device(), float64(), shape);
    {
        auto source = array_from_bytes(source_device(), float64(), shape, source_bytes);
        ASSERT_EQ(copy_into(destination, source.get()), MTS_SUCCESS) << last_error();
    }
    EXPECT_EQ(read_bytes(destination), source_bytes);
}

TEST_P(CopyInto, RefillsTheSameDestination) {
    // a buffer made once, refilled every step
    std::mt19937_64 rng(17);
    const std::vector<uintptr_t> shape = {64, 5};
    auto destination = mtsarray::Array::zeros(destination_device(), float64(), shape);
    for (int step = 0; step < 5; step++) {
        const auto source_bytes = random_bytes(rng, product(shape) * 8);
        auto source = array_from_bytes(source_device(), float64(), shape, source_bytes);
        ASSERT_EQ(copy_into(destination, source.get()), MTS_SUCCESS) << last_error();
        ASSERT_EQ(read_bytes(destination), source_bytes) << "step " << step;
    }
}

TEST_P(CopyInto, MismatchesWriteNothing) {
    std::mt19937_64 rng(19);
    const auto old_bytes = random_bytes(rng, 6 * 8);
    auto destination = array_from_bytes(destination_device(), float64(), {2, 3}, old_bytes);

    auto other_dtype = mtsarray::Array::zeros(source_device(), float32(), {2, 3});
    reset_last_error();
    EXPECT_EQ(copy_into(destination, other_dtype.get()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("dtype"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("mtsarray_copy_into"), std::string::npos) << last_error();

    auto other_shape = mtsarray::Array::zeros(source_device(), float64(), {3, 2});
    reset_last_error();
    EXPECT_EQ(copy_into(destination, other_shape.get()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("shape"), std::string::npos) << last_error();

    EXPECT_EQ(read_bytes(destination), old_bytes);
}

class CopyIntoFromTheHost : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_PRESENT(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(EveryDevice, CopyIntoFromTheHost, ::testing::ValuesIn(copy_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return copy_device_name(info.param); });

TEST_P(CopyIntoFromTheHost, AStridedForeignSource) {
    // a [3, 4] float64 view, column-major in a larger buffer: element (i, j)
    // at 2 * (i + 5 * j); every other slot holds a value that must not appear
    std::vector<double> storage(2 * 5 * 4, -99.0);
    std::vector<double> expected(12);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            storage[2 * (i + 5 * j)] = 10.0 * i + j;
            expected[4 * i + j] = 10.0 * i + j;
        }
    }
    mts_array_t source = StridedForeignArray::make(float64(), {3, 4}, {2, 10}, to_bytes(storage));
    auto destination = mtsarray::Array::zeros(GetParam(), float64(), {3, 4});
    EXPECT_EQ(copy_into(destination, source), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(destination)), expected);
    source.destroy(source.ptr);
}

// A foreign source in the GPU's page-locked or managed memory whose export
// must be copied first (strided, read-only): copied, not refused.
TEST_P(CopyIntoFromTheHost, AStridedOrReadOnlyForeignSourceInTheGpusHostMemory) {
    if (!(MTSARRAY_HAS_CUDA || simulated_gpu())) {
        GTEST_SKIP() << "no CUDA backend in this build: no page-locked or managed memory";
    }
    std::vector<double> storage(2 * 5 * 4, -99.0);
    std::vector<double> expected(12);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            storage[2 * (i + 5 * j)] = 10.0 * i + j;
            expected[4 * i + j] = 10.0 * i + j;
        }
    }
    for (const DLDeviceType host_type : {kDLCUDAHost, kDLCUDAManaged}) {
        for (const uint64_t flags : {uint64_t(0), uint64_t(DLPACK_FLAG_BITMASK_READ_ONLY)}) {
            SCOPED_TRACE(copy_device_name(DLDevice{host_type, 0}) + (flags != 0 ? ", read-only" : ", writable"));
            mts_array_t source =
                StridedForeignArray::make(float64(), {3, 4}, {2, 10}, to_bytes(storage), DLDevice{host_type, 0}, flags);
            auto destination = mtsarray::Array::zeros(GetParam(), float64(), {3, 4});
            EXPECT_EQ(copy_into(destination, source), MTS_SUCCESS) << last_error();
            EXPECT_EQ(from_bytes<double>(read_bytes(destination)), expected);
            source.destroy(source.ptr);
        }
    }
}

TEST_P(CopyIntoFromTheHost, AContiguousForeignSource) {
    int destroyed = 0;
    const std::vector<int32_t> values = {1, 2, 3, 4, 5, 6};
    mts_array_t source = ForeignArray::make(int32(), {2, 3}, to_bytes(values), &destroyed);
    source.device = [](const void*, DLDevice* device) -> mts_status_t {
        *device = DLDevice{kDLCPU, 0};
        return MTS_SUCCESS;
    };
    auto destination = mtsarray::Array::zeros(GetParam(), int32(), {2, 3});
    EXPECT_EQ(copy_into(destination, source), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(destination)), values);
    EXPECT_EQ(destroyed, 0) << "copy_into must not destroy its source";
    source.destroy(source.ptr);
    EXPECT_EQ(destroyed, 1);
}

TEST_P(CopyIntoFromTheHost, AFailingForeignSourceWritesNothing) {
    int destroyed = 0;
    mts_array_t source = ForeignArray::make(int32(), {2, 3}, to_bytes(std::vector<int32_t>(6, 7)), &destroyed,
                                            /*fail_as_dlpack=*/true);
    source.device = [](const void*, DLDevice* device) -> mts_status_t {
        *device = DLDevice{kDLCPU, 0};
        return MTS_SUCCESS;
    };
    const std::vector<int32_t> old_values = {9, 8, 7, 6, 5, 4};
    auto destination = array_from_bytes(GetParam(), int32(), {2, 3}, to_bytes(old_values));
    reset_last_error();
    EXPECT_EQ(copy_into(destination, source), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("ForeignArray refuses to export"), std::string::npos) << last_error();
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(destination)), old_values);
    source.destroy(source.ptr);
}

TEST(CopyIntoErrors, TheDestinationMustBeAnMtsarrayArray) {
    int destroyed = 0;
    mts_array_t foreign = ForeignArray::make(int32(), {2}, to_bytes(std::vector<int32_t>{1, 2}), &destroyed);
    auto source = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, int32(), {2});
    reset_last_error();
    EXPECT_EQ(mtsarray_copy_into(&foreign, &source.get()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("destination was not made by mtsarray"), std::string::npos) << last_error();
    EXPECT_EQ(from_bytes<int32_t>(static_cast<ForeignArray*>(foreign.ptr)->bytes), (std::vector<int32_t>{1, 2}));
    foreign.destroy(foreign.ptr);

    EXPECT_EQ(mtsarray_copy_into(nullptr, &source.get()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("destination is NULL"), std::string::npos) << last_error();
    EXPECT_EQ(mtsarray_copy_into(&source.get(), nullptr), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("source is NULL"), std::string::npos) << last_error();
}

TEST(CopyIntoErrors, ADestroyedSourceIsRefused) {
    auto destination = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2});
    mts_array_t source = {};
    ASSERT_EQ(mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), std::vector<uintptr_t>{2}.data(), 1, &source),
              MTS_SUCCESS);
    mts_array_t stale = source;
    source.destroy(source.ptr);
    reset_last_error();
    EXPECT_EQ(mtsarray_copy_into(&destination.get(), &stale), MTS_CALLBACK_ERROR);
    EXPECT_FALSE(last_error().empty());
}

TEST(CopyIntoOverlap, ViewsOfOneBufferCopyLikeMemmove) {
    // two wrapped views of one host buffer, shifted by two elements
    std::vector<double> memory = {0, 1, 2, 3, 4, 5, 6, 7};
    auto low = mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, float64(), {6});
    auto high = mtsarray::Array::wrap(memory.data() + 2, DLDevice{kDLCPU, 0}, float64(), {6});
    ASSERT_EQ(copy_into(high, low.get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(memory, (std::vector<double>{0, 1, 0, 1, 2, 3, 4, 5}));
    ASSERT_EQ(copy_into(low, high.get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(memory, (std::vector<double>{0, 1, 2, 3, 4, 5, 4, 5}));
}

TEST(CopyIntoCpp, CopyFromTakesArraysOfAnyOrigin) {
    auto destination = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 2});
    auto source = mtsarray::Array::full(DLDevice{kDLCPU, 0}, {2, 2}, 2.5);
    destination.copy_from(source);
    EXPECT_EQ(from_bytes<double>(read_bytes(destination)), (std::vector<double>(4, 2.5)));
    auto wrong = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {4});
    EXPECT_THROW(destination.copy_from(wrong), mtsarray::Error);
}

}  // namespace
