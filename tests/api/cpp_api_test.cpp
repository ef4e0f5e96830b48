// The C++ layer (include/mtsarray.hpp): an empty Array (moved from, or
// released) throws mtsarray::Error from every member instead of calling
// through a null vtable, and ownership moves with the object.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

void expect_empty_error(const std::function<void()>& call, const char* what) {
    try {
        call();
        ADD_FAILURE() << what << " did not throw on an empty Array";
    } catch (const mtsarray::Error& error) {
        EXPECT_NE(std::string(error.what()).find("empty"), std::string::npos) << what << ": " << error.what();
    } catch (...) {
        ADD_FAILURE() << what << " threw something else than mtsarray::Error";
    }
}

void expect_every_member_throws(mtsarray::Array& empty) {
    EXPECT_FALSE(empty.has_value());
    expect_empty_error([&] { (void)empty.copy(mtsarray::cpu()); }, "copy");
    expect_empty_error([&] { (void)empty.device(); }, "device");
    expect_empty_error([&] { (void)empty.dtype(); }, "dtype");
    expect_empty_error([&] { (void)empty.shape(); }, "shape");
    expect_empty_error([&] { (void)empty.data(); }, "data");
    expect_empty_error([&] { (void)empty.stream(); }, "stream");
    expect_empty_error([&] { empty.set_stream(-1); }, "set_stream");
    expect_empty_error([&] { empty.synchronize(); }, "synchronize");
    expect_empty_error([&] { (void)std::move(empty).into_metatensor(); }, "into_metatensor");
}

}  // namespace

TEST(CppApi, AMovedFromArrayThrowsFromEveryMember) {
    auto array = mtsarray::Array::full<double>(mtsarray::cpu(), {2, 3}, 4.0);
    auto moved = std::move(array);
    expect_every_member_throws(array);
    // the new owner has it all
    EXPECT_TRUE(moved.has_value());
    EXPECT_EQ(moved.shape(), (std::vector<uintptr_t>{2, 3}));
    EXPECT_EQ(from_bytes<double>(read_bytes(moved)), std::vector<double>(6, 4.0));
}

TEST(CppApi, AMoveAssignedFromArrayThrowsFromEveryMember) {
    auto array = mtsarray::Array::zeros(mtsarray::cpu(), float32(), {5});
    auto target = mtsarray::Array::zeros(mtsarray::cpu(), float64(), {1});
    target = std::move(array);
    expect_every_member_throws(array);
    EXPECT_TRUE(same_dtype(target.dtype(), float32()));
}

TEST(CppApi, AReleasedArrayThrowsFromEveryMember) {
    auto array = mtsarray::Array::zeros(mtsarray::cpu(), float64(), {3});
    mts_array_t raw = std::move(array).release();
    expect_every_member_throws(array);
    raw.destroy(raw.ptr);
}

TEST(CppApi, DeviceCount) {
    EXPECT_EQ(mtsarray::device_count(kDLCPU), 1);
    EXPECT_EQ(mtsarray::device_count(kDLCUDA) > 0, mtsarray::backend_available(kDLCUDA));
    try {
        (void)mtsarray::device_count(kDLVulkan);
        ADD_FAILURE() << "no error for a device type without a backend";
    } catch (const mtsarray::Error& error) {
        EXPECT_NE(std::string(error.what()).find("mtsarray_device_count: mtsarray has no backend for vulkan devices"),
                  std::string::npos)
            << error.what();
    }
}
