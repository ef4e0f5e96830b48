// Error reporting at the C boundary: every failure sets mts_last_error with
// origin "mtsarray", a message naming the function and the array, and the
// original C++ exception as data; nothing throws across the boundary and no
// output is written. Also the size checks that keep shapes and allocations
// consistent.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

::testing::AssertionResult has_error(mts_status_t status, const std::vector<std::string>& parts) {
    if (status == MTS_SUCCESS) {
        return ::testing::AssertionFailure() << "expected an error, got MTS_SUCCESS";
    }
    const auto message = last_error();
    for (const auto& part : parts) {
        if (message.find(part) == std::string::npos) {
            return ::testing::AssertionFailure() << "'" << part << "' is not in the message: " << message;
        }
    }
    if (last_error_origin() != "mtsarray") {
        return ::testing::AssertionFailure() << "origin is '" << last_error_origin() << "'";
    }
    return ::testing::AssertionSuccess();
}

class CallbackErrors : public ::testing::Test {
protected:
    void SetUp() override {
        std::vector<double> values(12);
        for (size_t i = 0; i < values.size(); i++) {
            values[i] = static_cast<double>(i) * 0.5;
        }
        bytes_ = to_bytes(values);
        array_ = std::make_unique<mtsarray::Array>(array_from_bytes(DLDevice{kDLCPU, 0}, float64(), {3, 4}, bytes_));
        reset_last_error();
    }
    mts_array_t& raw() { return const_cast<mts_array_t&>(array_->get()); }

    std::vector<uint8_t> bytes_;
    std::unique_ptr<mtsarray::Array> array_;
};

const std::string described = "float64 array of shape [3, 4] on cpu";

TEST_F(CallbackErrors, MoveDataNamesTheFunctionAndBothArrays) {
    auto input = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float32(), {2, 4});
    mts_data_movement_t movement = {0, 0, 0, 0, 1};
    EXPECT_TRUE(has_error(raw().move_data(raw().ptr, input.get().ptr, &movement, 1),
                          {"mtsarray: move_data", described, "input (float32 array of shape [2, 4] on cpu)",
                           "different dtypes"}));
    EXPECT_EQ(read_bytes(*array_), bytes_);
}

TEST_F(CallbackErrors, ReshapeAndSwapAxes) {
    const uintptr_t shape[] = {5, 5};
    EXPECT_TRUE(has_error(raw().reshape(raw().ptr, shape, 2), {"mtsarray: reshape", described, "[5, 5]"}));
    EXPECT_TRUE(has_error(raw().swap_axes(raw().ptr, 0, 3), {"mtsarray: swap_axes", described}));
    EXPECT_EQ(array_->shape(), (std::vector<uintptr_t>{3, 4}));
    EXPECT_EQ(read_bytes(*array_), bytes_);
}

TEST_F(CallbackErrors, CopyAndAsDlpackToAMissingDevice) {
    mts_array_t copy = {};
    EXPECT_TRUE(has_error(raw().copy(raw().ptr, DLDevice{kDLOpenCL, 0}, &copy),
                          {"mtsarray: copy", described, "no backend for opencl devices"}));
    EXPECT_EQ(copy.ptr, nullptr);
    if (!backend_available(kDLCUDA)) {
        EXPECT_TRUE(has_error(raw().copy(raw().ptr, DLDevice{kDLCUDA, 0}, &copy),
                              {"mtsarray: copy", described, mtsarray_backend_unavailable_reason(kDLCUDA)}));
    }
    DLManagedTensorVersioned* tensor = nullptr;
    EXPECT_TRUE(has_error(raw().as_dlpack(raw().ptr, &tensor, DLDevice{kDLCPU, 3}, nullptr, dlpack_version()),
                          {"mtsarray: as_dlpack", described, "invalid CPU device id 3"}));
    EXPECT_EQ(tensor, nullptr);
}

TEST_F(CallbackErrors, NullOutputs) {
    EXPECT_TRUE(has_error(raw().origin(raw().ptr, nullptr), {"mtsarray: origin", described, "origin is NULL"}));
    EXPECT_TRUE(has_error(raw().device(raw().ptr, nullptr), {"mtsarray: device", described, "device is NULL"}));
    EXPECT_TRUE(has_error(raw().dtype(raw().ptr, nullptr), {"mtsarray: dtype", described, "dtype is NULL"}));
    uintptr_t count = 0;
    EXPECT_TRUE(has_error(raw().shape(raw().ptr, nullptr, &count), {"mtsarray: shape", "shape is NULL"}));
    const uintptr_t* shape = nullptr;
    EXPECT_TRUE(has_error(raw().shape(raw().ptr, &shape, nullptr), {"shape_count is NULL"}));
    EXPECT_TRUE(has_error(raw().copy(raw().ptr, DLDevice{kDLCPU, 0}, nullptr), {"mtsarray: copy", "new_array is NULL"}));
    EXPECT_TRUE(has_error(raw().as_dlpack(raw().ptr, nullptr, DLDevice{kDLCPU, 0}, nullptr, dlpack_version()),
                          {"dl_managed_tensor is NULL"}));
}

TEST_F(CallbackErrors, ForeignHandles) {
    // a vtable slot called with a handle that is not one of ours
    std::vector<uint64_t> garbage(16, 0x0123456789ABCDEF);
    DLDataType dtype = {};
    EXPECT_TRUE(has_error(raw().dtype(garbage.data(), &dtype),
                          {"mtsarray: dtype", "this array was not made by mtsarray"}));
    EXPECT_TRUE(has_error(raw().dtype(nullptr, &dtype), {"this array is NULL"}));
    // the message does not try to describe the foreign array
    EXPECT_EQ(last_error().find("array of shape"), std::string::npos) << last_error();
    // destroy ignores foreign handles instead of freeing them
    raw().destroy(garbage.data());
    EXPECT_EQ(garbage[0], 0x0123456789ABCDEFu);
}

TEST_F(CallbackErrors, TheOriginalExceptionIsKept) {
    const uintptr_t shape[] = {7};
    ASSERT_EQ(raw().reshape(raw().ptr, shape, 1), MTS_CALLBACK_ERROR);
    void* data = nullptr;
    const char* origin = nullptr;
    ASSERT_EQ(mts_last_error(nullptr, &origin, &data), MTS_SUCCESS);
    EXPECT_STREQ(origin, "mtsarray");
    ASSERT_NE(data, nullptr);
    auto exception = *static_cast<std::exception_ptr*>(data);
    try {
        std::rethrow_exception(exception);
    } catch (const std::exception& error) {
        // the exception's own message, without the callback's prefix
        EXPECT_EQ(std::string(error.what()), "can not reshape to [7] (7 elements), the array has 12 elements");
    }
}

TEST(CApiErrors, ZerosFullAndWrap) {
    const uintptr_t shape[] = {2, 3};
    mts_array_t array;
    std::memset(&array, 0x77, sizeof(array));
    const auto untouched = array;

    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, make_dtype(kDLFloat, 4), shape, 2, &array),
                          {"mtsarray_zeros: unsupported dtype float4: sub-byte types"}));
    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, make_dtype(kDLInt, 32, 4), shape, 2, &array),
                          {"mtsarray_zeros: unsupported dtype int32x4: only lanes == 1 is supported"}));
    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, make_dtype(kDLComplex, 32), shape, 2, &array),
                          {"unsupported dtype complex32: this width does not exist for complex data"}));
    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), nullptr, 2, &array),
                          {"mtsarray_zeros: shape is NULL with shape_count = 2"}));
    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLVulkan, 0}, float64(), shape, 2, &array),
                          {"mtsarray_zeros: mtsarray has no backend for vulkan devices"}));
    for (auto type : {kDLCUDA, kDLROCM, kDLCUDAManaged}) {
        if (!backend_available(type)) {
            EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{type, 0}, float64(), shape, 2, &array),
                                  {"mtsarray_zeros", mtsarray_backend_unavailable_reason(type)}));
        }
    }
    const double value = 1.0;
    EXPECT_TRUE(has_error(mtsarray_full(DLDevice{kDLCPU, 0}, float64(), shape, 2, nullptr, &array),
                          {"mtsarray_full: value is NULL"}));
    EXPECT_TRUE(has_error(mtsarray_full(DLDevice{kDLCPU, 1}, float64(), shape, 2, &value, &array),
                          {"mtsarray_full: invalid CPU device id 1"}));
    EXPECT_TRUE(has_error(mtsarray_wrap(nullptr, DLDevice{kDLCPU, 0}, float64(), shape, 2, nullptr, nullptr, &array),
                          {"mtsarray_wrap: data is NULL for a non-empty array"}));
    EXPECT_EQ(std::memcmp(&array, &untouched, sizeof(array)), 0) << "output written on error";

    EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), shape, 2, nullptr), {"array is NULL"}));
}

TEST(CApiErrors, QueriesOnForeignArrays) {
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{2}));
    auto raw = simple.as_mts_array_t();
    bool ours = true;
    ASSERT_EQ(mtsarray_is_mtsarray(&raw, &ours), MTS_SUCCESS);
    EXPECT_FALSE(ours);
    void* data = nullptr;
    EXPECT_TRUE(has_error(mtsarray_data(&raw, &data), {"mtsarray_data: array was not made by mtsarray"}));
    EXPECT_EQ(data, nullptr);
    EXPECT_TRUE(has_error(mtsarray_is_mtsarray(nullptr, &ours), {"mtsarray_is_mtsarray: array is NULL"}));
    EXPECT_TRUE(has_error(mtsarray_backend_available(kDLCPU, nullptr), {"available is NULL"}));

    // the C++ wrapper refuses foreign arrays and leaves them alone
    try {
        mtsarray::Array adopted(raw);
        FAIL() << "a foreign array was adopted";
    } catch (const mtsarray::Error& error) {
        EXPECT_NE(std::string(error.what()).find("was not made by mtsarray"), std::string::npos);
    }
    EXPECT_EQ(simple.shape(), (std::vector<uintptr_t>{2}));

    // and turns C errors into exceptions carrying the message
    try {
        mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, make_dtype(kDLUInt, 12), {2});
        FAIL() << "no exception";
    } catch (const metatensor::Error& error) {
        EXPECT_NE(std::string(error.what()).find("unsupported dtype uint12"), std::string::npos) << error.what();
    }
}

TEST(CApiErrors, Probes) {
    bool available = false;
    ASSERT_EQ(mtsarray_backend_available(kDLCPU, &available), MTS_SUCCESS);
    EXPECT_TRUE(available);
    EXPECT_STREQ(mtsarray_backend_unavailable_reason(kDLCPU), "");
    // the reason is a stable pointer, computed once
    EXPECT_EQ(mtsarray_backend_unavailable_reason(kDLOpenCL), mtsarray_backend_unavailable_reason(kDLOpenCL));
    EXPECT_NE(std::string(mtsarray_backend_unavailable_reason(kDLOpenCL)).find("no backend for opencl"),
              std::string::npos);
    ASSERT_EQ(mtsarray_backend_available(kDLOpenCL, &available), MTS_SUCCESS);
    EXPECT_FALSE(available);
#if !MTSARRAY_HAS_CUDA
    if (!simulated_gpu()) {  // the simulated runtime serves CUDA memory otherwise
        EXPECT_STREQ(mtsarray_backend_unavailable_reason(kDLCUDA),
                     "mtsarray was built without CUDA support (MTSARRAY_CUDA=OFF), cuda arrays are not available");
        EXPECT_STREQ(mtsarray_backend_unavailable_reason(kDLCUDAHost),
                     "mtsarray was built without CUDA support (MTSARRAY_CUDA=OFF), cuda_host arrays are not "
                     "available");
    }
#endif
#if !MTSARRAY_HAS_HIP
    EXPECT_STREQ(mtsarray_backend_unavailable_reason(kDLROCM),
                 "mtsarray was built without HIP support (MTSARRAY_HIP=OFF), rocm arrays are not available");
#endif
    EXPECT_STREQ(mtsarray_version(), MTSARRAY_VERSION);
}

// mtsarray_device_count: 1 CPU, the runtime's count for each GPU type, 0
// for a GPU backend without devices (exactly when backend_available says
// false), an error for a type no backend serves, *count untouched on error.
TEST(CApiErrors, DeviceCount) {
    int32_t count = -7;
    ASSERT_EQ(mtsarray_device_count(kDLCPU, &count), MTS_SUCCESS) << last_error();
    EXPECT_EQ(count, 1);

    for (auto type : {kDLOpenCL, kDLVulkan, kDLMetal, static_cast<DLDeviceType>(12345)}) {
        count = -7;
        EXPECT_TRUE(has_error(mtsarray_device_count(type, &count),
                              {"mtsarray_device_count: mtsarray has no backend for ",
                               "(supported: cpu, cuda, cuda_host, cuda_managed, rocm, rocm_host)"}));
        EXPECT_EQ(count, -7) << "count written on error";
    }
    EXPECT_TRUE(has_error(mtsarray_device_count(kDLOpenCL, &count), {"no backend for opencl devices"}));
    EXPECT_TRUE(has_error(mtsarray_device_count(static_cast<DLDeviceType>(12345), &count),
                          {"no backend for device type 12345"}));
    EXPECT_TRUE(has_error(mtsarray_device_count(kDLCUDA, nullptr), {"mtsarray_device_count: count is NULL"}));

    const uintptr_t shape[1] = {2};
    for (auto family : {std::vector<DLDeviceType>{kDLCUDA, kDLCUDAHost, kDLCUDAManaged},
                        std::vector<DLDeviceType>{kDLROCM, kDLROCMHost}}) {
        int32_t devices = -7;
        ASSERT_EQ(mtsarray_device_count(family[0], &devices), MTS_SUCCESS) << last_error();
        ASSERT_GE(devices, 0);
        EXPECT_EQ(devices > 0, backend_available(family[0])) << mtsarray_backend_unavailable_reason(family[0]);
        for (auto type : family) {  // host-accessible memory follows its GPU backend
            count = -7;
            ASSERT_EQ(mtsarray_device_count(type, &count), MTS_SUCCESS) << last_error();
            EXPECT_EQ(count, devices) << device_name(DLDevice{type, 0});
        }
        if (devices == 0) {
            continue;
        }
        // the last id counted is a device, the next one is not
        mts_array_t array = {};
        ASSERT_EQ(mtsarray_zeros(DLDevice{family[0], devices - 1}, float64(), shape, 1, &array), MTS_SUCCESS)
            << last_error();
        array.destroy(array.ptr);
        const std::string plural = devices == 1 ? " device)" : " devices)";
        EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{family[0], devices}, float64(), shape, 1, &array),
                              {"device id " + std::to_string(devices) + " out of range (" + std::to_string(devices),
                               plural}));
    }
#if MTSARRAY_TEST_SIMULATED_GPU
    if (simulated_gpu()) {  // MTSARRAY_SIM_DEVICES of them, and counting them makes no context
        sim::drain();
        sim::forget_contexts();
        for (auto type : {kDLCUDA, kDLCUDAHost, kDLCUDAManaged}) {
            ASSERT_EQ(mtsarray_device_count(type, &count), MTS_SUCCESS) << last_error();
            EXPECT_EQ(count, sim::device_count());
        }
        EXPECT_TRUE(sim::contexts().empty()) << "a context on device " << sim::contexts().front();
    }
#endif
#if !MTSARRAY_HAS_HIP
    count = -7;
    ASSERT_EQ(mtsarray_device_count(kDLROCM, &count), MTS_SUCCESS) << last_error();
    EXPECT_EQ(count, 0) << "a backend that was not compiled in has no device";
#endif
}

// A getter that fails leaves its output as the caller had it.
TEST(CApiErrors, TheReleaseThresholdOfAnUnusableDeviceLeavesTheOutputUntouched) {
    std::vector<std::pair<DLDevice, std::string>> unusable = {{{kDLCPU, 1}, "invalid CPU device id 1"},
                                                              {{kDLCPU, -1}, "invalid CPU device id -1"}};
    const DLDevice missing_gpu = {kDLCUDA, 7};
    if (backend_available(kDLCUDA)) {
        if (why_device_is_missing(missing_gpu).empty()) {
            ADD_FAILURE() << "this machine has a cuda:7: the test needs a CUDA device that does not exist";
        } else {
            unusable.push_back({missing_gpu, "device id 7 out of range"});
        }
    }
    for (const auto& device : unusable) {
        uint64_t bytes = 12345;
        EXPECT_TRUE(has_error(mtsarray_get_release_threshold(device.first, &bytes),
                              {"mtsarray_get_release_threshold", device.second}))
            << device.second;
        EXPECT_EQ(bytes, 12345u) << device.second << ": the output was written by a failing call";
    }
}

// ---- callbacks of foreign arrays that fail -----------------------------------------

// Another library's array (metatensor's SimpleDataArray) whose device() or
// as_dlpack() fails, setting a message or breaking the contract by setting
// none; every other slot is SimpleDataArray's own.
enum class FailingSlot { device, as_dlpack };
enum class FailureMessage { set, none };

constexpr const char* foreign_message = "the foreign library lost its device";

mts_status_t say_why_and_fail() {
    mts_set_last_error(foreign_message, "foreign-library", nullptr, nullptr);
    return MTS_CALLBACK_ERROR;
}

mts_array_t failing_foreign_array(std::vector<uintptr_t> shape, FailingSlot slot, FailureMessage message) {
    auto array = metatensor::DataArrayBase::to_mts_array(
                     std::make_unique<metatensor::SimpleDataArray<double>>(std::move(shape)))
                     .release();
    if (slot == FailingSlot::device) {
        if (message == FailureMessage::set) {
            array.device = [](const void*, DLDevice*) { return say_why_and_fail(); };
        } else {
            array.device = [](const void*, DLDevice*) -> mts_status_t { return MTS_CALLBACK_ERROR; };
        }
    } else {
        if (message == FailureMessage::set) {
            array.as_dlpack = [](void*, DLManagedTensorVersioned**, DLDevice, const int64_t*, DLPackVersion) {
                return say_why_and_fail();
            };
        } else {
            array.as_dlpack = [](void*, DLManagedTensorVersioned**, DLDevice, const int64_t*,
                                 DLPackVersion) -> mts_status_t { return MTS_CALLBACK_ERROR; };
        }
    }
    return array;
}

const mts_labels_t* labels_of(const char* name, const std::vector<int32_t>& values) {
    auto array = array_from_bytes(DLDevice{kDLCPU, 0}, int32(), {values.size(), 1}, to_bytes(values));
    const mts_labels_t* labels = mts_labels(&name, 1, std::move(array).release());
    EXPECT_NE(labels, nullptr) << last_error();
    return labels;
}

// A TensorMap of one block whose values are `values` ([2, 3]).
mts_tensormap_t* tensormap_of(mts_array_t values) {
    const mts_labels_t* samples = labels_of("sample", {0, 1});
    const mts_labels_t* properties = labels_of("property", {0, 1, 2});
    const mts_labels_t* keys = labels_of("key", {0});
    mts_block_t* block = mts_block(values, samples, nullptr, 0, properties);
    EXPECT_NE(block, nullptr) << last_error();
    mts_tensormap_t* tensor = mts_tensormap(keys, &block, 1);
    EXPECT_NE(tensor, nullptr) << last_error();
    mts_labels_free(samples);
    mts_labels_free(properties);
    mts_labels_free(keys);
    return tensor;
}

// What the message says of the callback's failure.
std::string reason(FailureMessage message) {
    return message == FailureMessage::set ? foreign_message : "the callback failed without saying why";
}

// What failed, as the message of `role`'s callback in `slot` names it.
std::string failing_step(FailingSlot slot, const std::string& role) {
    return slot == FailingSlot::device ? "reading the device of " + role : "exporting " + role + " through DLPack";
}

// "<context>: <step> failed: <reason>"
std::string expected_failure(const std::string& context, const std::string& step, FailureMessage message) {
    return context + ": " + step + " failed: " + reason(message);
}

class FailingForeignCallbacks : public ::testing::TestWithParam<FailureMessage> {
protected:
    // an unrelated failure first: its message must never reappear
    void SetUp() override { ASSERT_EQ(mtsarray_set_num_threads(0), MTS_CALLBACK_ERROR); }
};

TEST_P(FailingForeignCallbacks, CopyIntoQuotesTheCallbackAndNothingOlder) {
    auto destination = mtsarray::Array::full<double>(DLDevice{kDLCPU, 0}, {2, 3}, 4.0);
    for (auto slot : {FailingSlot::device, FailingSlot::as_dlpack}) {
        mts_array_t source = failing_foreign_array({2, 3}, slot, GetParam());
        // the same message every time: no earlier error nested inside
        for (int call = 0; call < 3; call++) {
            EXPECT_EQ(mtsarray_copy_into(&destination.get(), &source), MTS_CALLBACK_ERROR);
            EXPECT_EQ(last_error(),
                      expected_failure("mtsarray_copy_into", failing_step(slot, "source"), GetParam()));
        }
        source.destroy(source.ptr);
    }
    EXPECT_EQ(from_bytes<double>(read_bytes(destination)), std::vector<double>(6, 4.0));
}

TEST_P(FailingForeignCallbacks, MovePlanCreateQuotesTheCallbackAndNothingOlder) {
    auto output = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 3});
    const mts_data_movement_t movement = {0, 1, 0, 0, 3};
    for (auto slot : {FailingSlot::device, FailingSlot::as_dlpack}) {
        mts_array_t input = failing_foreign_array({2, 3}, slot, GetParam());
        for (int call = 0; call < 3; call++) {
            mtsarray_move_plan_t* plan = nullptr;
            EXPECT_EQ(mtsarray_move_plan_create(&output.get(), &input, &movement, 1, &plan), MTS_CALLBACK_ERROR);
            EXPECT_EQ(plan, nullptr);
            EXPECT_EQ(last_error(),
                      expected_failure("mtsarray_move_plan_create", failing_step(slot, "input"), GetParam()));
        }
        input.destroy(input.ptr);
    }
}

TEST_P(FailingForeignCallbacks, CreateQuotesTheFillValueAndNothingOlder) {
    auto prototype = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2});
    const auto& raw = prototype.get();
    const uintptr_t shape[] = {4};
    for (int call = 0; call < 3; call++) {
        mts_array_t created = {};
        // create takes the fill value, and destroys it, error or not
        EXPECT_EQ(raw.create(raw.ptr, shape, 1, failing_foreign_array({}, FailingSlot::as_dlpack, GetParam()),
                             &created),
                  MTS_CALLBACK_ERROR);
        EXPECT_EQ(created.ptr, nullptr);
        EXPECT_EQ(last_error(), expected_failure("mtsarray: create (float64 array of shape [2] on cpu)",
                                                 "reading fill_value on the CPU through its as_dlpack",
                                                 GetParam()));
    }
}

TEST_P(FailingForeignCallbacks, TensorMapToQuotesTheCallbackAndNothingOlder) {
    // libmetatensor reads the device of a block's values itself: only the
    // export fails here
    mts_tensormap_t* tensor = tensormap_of(failing_foreign_array({2, 3}, FailingSlot::as_dlpack, GetParam()));
    ASSERT_NE(tensor, nullptr);
    ASSERT_EQ(mtsarray_set_num_threads(0), MTS_CALLBACK_ERROR);
    for (int call = 0; call < 3; call++) {
        mts_tensormap_t* moved = nullptr;
        EXPECT_EQ(mtsarray_tensormap_to(tensor, DLDevice{kDLCPU, 0}, -1, &moved), MTS_CALLBACK_ERROR);
        EXPECT_EQ(moved, nullptr);
        EXPECT_EQ(last_error(), expected_failure("mtsarray_tensormap_to",
                                                 failing_step(FailingSlot::as_dlpack, "an array of the TensorMap"),
                                                 GetParam()));
    }
    mts_tensormap_free(tensor);
}

TEST(FailingForeignCallbacks, TheMessageNeverGrows) {
    auto destination = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 3});
    mts_array_t source = failing_foreign_array({2, 3}, FailingSlot::device, FailureMessage::none);
    ASSERT_EQ(mtsarray_copy_into(&destination.get(), &source), MTS_CALLBACK_ERROR);
    const std::string first = last_error();
    for (int call = 0; call < 1000; call++) {
        ASSERT_EQ(mtsarray_copy_into(&destination.get(), &source), MTS_CALLBACK_ERROR);
    }
    EXPECT_EQ(last_error().size(), first.size());
    EXPECT_EQ(first, "mtsarray_copy_into: reading the device of source failed: the callback failed without saying why");
    source.destroy(source.ptr);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutAMessage, FailingForeignCallbacks,
                         ::testing::Values(FailureMessage::set, FailureMessage::none),
                         [](const auto& info) {
                             return std::string(info.param == FailureMessage::set ? "WithAMessage"
                                                                                  : "WithoutAMessage");
                         });

// ---- an export that fails and still hands a tensor out ------------------------------

namespace {

/// Tensors handed out by the failing exports below, and deleters called.
std::atomic<int> handed_out{0};
std::atomic<int> deleted{0};

/// A foreign array ([2, 3] float64, metatensor's SimpleDataArray) whose
/// as_dlpack hands a tensor out, then reports a failure: the rule is that
/// whoever asked releases it all the same.
mts_array_t exporting_and_failing_array() {
    auto array = metatensor::DataArrayBase::to_mts_array(
                     std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{2, 3}))
                     .release();
    array.as_dlpack = [](void*, DLManagedTensorVersioned** tensor, DLDevice, const int64_t*, DLPackVersion) {
        static double data[6] = {};
        static int64_t shape[2] = {2, 3};
        auto* managed = new DLManagedTensorVersioned{};
        managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        managed->dl_tensor.data = data;
        managed->dl_tensor.device = DLDevice{kDLCPU, 0};
        managed->dl_tensor.ndim = 2;
        managed->dl_tensor.dtype = float64();
        managed->dl_tensor.shape = shape;
        managed->deleter = [](DLManagedTensorVersioned* self) {
            deleted++;
            delete self;
        };
        *tensor = managed;
        handed_out++;
        mts_set_last_error("the export failed half way", "foreign-library", nullptr, nullptr);
        return MTS_CALLBACK_ERROR;
    };
    return array;
}

}  // namespace

// Every call that reads a foreign array through its export -- copy_into, a
// plan's creation and execution, tensormap_to, create's fill value --
// releases a tensor that a failing export handed out anyway: as many
// deleters called as tensors handed out, and the export's own message.
TEST(FailingExports, ATensorHandedOutByAFailingExportIsReleased) {
    handed_out = 0;
    deleted = 0;
    mts_array_t failing = exporting_and_failing_array();
    auto destination = mtsarray::Array::full<double>(DLDevice{kDLCPU, 0}, {2, 3}, 4.0);
    EXPECT_TRUE(has_error(mtsarray_copy_into(&destination.get(), &failing), {"the export failed half way"}));

    const mts_data_movement_t movement = {0, 1, 0, 0, 3};
    mtsarray_move_plan_t* plan = nullptr;
    EXPECT_TRUE(has_error(mtsarray_move_plan_create(&destination.get(), &failing, &movement, 1, &plan),
                          {"the export failed half way"}));
    auto input = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 3});
    ASSERT_EQ(mtsarray_move_plan_create(&destination.get(), &input.get(), &movement, 1, &plan), MTS_SUCCESS)
        << last_error();
    EXPECT_TRUE(has_error(mtsarray_move_plan_execute(plan, &destination.get(), &failing),
                          {"the export failed half way"}));
    mtsarray_move_plan_free(plan);

    mts_tensormap_t* tensor = tensormap_of(exporting_and_failing_array());
    ASSERT_NE(tensor, nullptr);
    mts_tensormap_t* moved = nullptr;
    EXPECT_TRUE(has_error(mtsarray_tensormap_to(tensor, DLDevice{kDLCPU, 0}, -1, &moved),
                          {"the export failed half way"}));
    mts_tensormap_free(tensor);

    const uintptr_t shape[] = {4};
    mts_array_t created = {};
    const mts_array_t& raw = destination.get();
    mts_array_t scalar = exporting_and_failing_array();
    scalar.shape = [](const void*, const uintptr_t** shape, uintptr_t* count) {
        *shape = nullptr;
        *count = 0;
        return MTS_SUCCESS;
    };
    EXPECT_EQ(raw.create(raw.ptr, shape, 1, scalar, &created), MTS_CALLBACK_ERROR);

    failing.destroy(failing.ptr);
    EXPECT_EQ(handed_out.load(), 5);
    EXPECT_EQ(deleted.load(), handed_out.load()) << "tensors handed out by failing exports leaked";
    EXPECT_EQ(from_bytes<double>(read_bytes(destination)), std::vector<double>(6, 4.0));
}

// ---- sizes -------------------------------------------------------------------------

TEST(Sizes, ShapesWhoseByteSizeOverflowsAreRejected) {
    constexpr uintptr_t big = uintptr_t(1) << 62;
    const std::vector<std::vector<uintptr_t>> shapes = {
        {big, 3},                                   // 3 * 2^62 elements fit, their bytes do not
        {big, 8},                                   // 2^65 elements: wraps to exactly 0
        {uintptr_t(1) << 32, uintptr_t(1) << 32},   // 2^64 elements: wraps to exactly 0
        {uintptr_t(1) << 61, 4},                    // 2^63 elements fit, 2^66 bytes do not
    };
    for (const auto& shape : shapes) {
        SCOPED_TRACE(::testing::Message() << "shape [" << shape[0] << ", " << shape[1] << "]");
        mts_array_t array = {};
        EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), shape.data(), shape.size(), &array),
                              {"is too large: its size in bytes overflows"}));
        EXPECT_EQ(array.ptr, nullptr);
        if (array.destroy != nullptr) {
            array.destroy(array.ptr);
        }
    }
    // a zero anywhere makes the array empty, whatever the other dimensions
    auto empty = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {big, 0, big});
    EXPECT_TRUE(read_bytes(empty).empty());
}

TEST(Sizes, DimensionsAboveInt64MaxAreRejectedWhereverAShapeEnters) {
    // DLPack's dimensions are int64_t: an array that could not be exported
    // must not exist, even an empty one
    const uintptr_t above = uintptr_t(1) << 63;
    const uintptr_t max = std::numeric_limits<uintptr_t>::max();
    const std::vector<std::vector<uintptr_t>> shapes = {{0, above}, {0, max, max}, {above}};
    const std::string why = "is larger than INT64_MAX";
    const double one = 1.0;
    auto prototype = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {0, 3});
    auto& raw = const_cast<mts_array_t&>(prototype.get());
    for (const auto& shape : shapes) {
        SCOPED_TRACE(::testing::Message() << "shape of " << shape.size() << " axes, last " << shape.back());
        mts_array_t array = {};
        EXPECT_TRUE(has_error(mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), shape.data(), shape.size(), &array),
                              {"mtsarray_zeros", why}));
        EXPECT_TRUE(has_error(mtsarray_full(DLDevice{kDLCPU, 0}, float64(), shape.data(), shape.size(), &one, &array),
                              {"mtsarray_full", why}));
        EXPECT_TRUE(has_error(mtsarray_wrap(nullptr, DLDevice{kDLCPU, 0}, float64(), shape.data(), shape.size(),
                                            nullptr, nullptr, &array),
                              {"mtsarray_wrap", why}));
        int destroyed = 0;
        auto fill = ForeignArray::make(float64(), {}, to_bytes(std::vector<double>{1.0}), &destroyed);
        EXPECT_TRUE(has_error(raw.create(raw.ptr, shape.data(), shape.size(), fill, &array), {"create", why}));
        EXPECT_EQ(destroyed, 1);
        EXPECT_TRUE(has_error(raw.reshape(raw.ptr, shape.data(), shape.size()), {"reshape", why}));
        EXPECT_EQ(array.ptr, nullptr);
    }
    EXPECT_EQ(prototype.shape(), (std::vector<uintptr_t>{0, 3}));
}

TEST(Sizes, CreateNeedsAFillValueOfExactlyOneElement) {
    auto prototype = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 2});
    auto& raw = const_cast<mts_array_t&>(prototype.get());
    const uintptr_t shape[] = {3};
    const auto value = to_bytes(std::vector<double>{2.5});
    // accepted: 0-d, and any number of axes of size 1
    for (const auto& fill_shape : std::vector<std::vector<int64_t>>{{}, {1}, {1, 1, 1}}) {
        int destroyed = 0;
        mts_array_t array = {};
        ASSERT_EQ(raw.create(raw.ptr, shape, 1, ForeignArray::make(float64(), fill_shape, value, &destroyed), &array),
                  MTS_SUCCESS)
            << last_error();
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), std::vector<double>(3, 2.5));
        EXPECT_EQ(destroyed, 1);
        array.destroy(array.ptr);
    }
    // refused, including shapes whose product is 1 by overflow or by sign
    for (const auto& fill_shape : std::vector<std::vector<int64_t>>{
             {-1, -1}, {7, 7905747460161236407}, {0}, {2}, {1, 0}, {std::numeric_limits<int64_t>::min(), -1}}) {
        int destroyed = 0;
        mts_array_t array = {};
        EXPECT_TRUE(has_error(
            raw.create(raw.ptr, shape, 1, ForeignArray::make(float64(), fill_shape, value, &destroyed), &array),
            {"create", "fill_value must hold a single scalar"}));
        EXPECT_EQ(destroyed, 1);
        EXPECT_EQ(array.ptr, nullptr);
    }
}

TEST(Sizes, ReshapeCanNotMakeAnEmptyArrayHuge) {
    auto empty = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {0, 3});
    auto& raw = const_cast<mts_array_t&>(empty.get());
    const uintptr_t huge[] = {uintptr_t(1) << 32, uintptr_t(1) << 32};
    EXPECT_TRUE(has_error(raw.reshape(raw.ptr, huge, 2), {"mtsarray: reshape", "is too large"}));
    EXPECT_EQ(empty.shape(), (std::vector<uintptr_t>{0, 3}));
}

// ---- threads ---------------------------------------------------------------------

TEST(Threads, CallbacksAndErrorsArePerThread) {
    // every thread makes, moves and reads its own arrays while all of them
    // read one shared array; each thread's last error is its own
    auto shared = array_from_bytes(DLDevice{kDLCPU, 0}, int32(), {16, 8},
                                   to_bytes(std::vector<int32_t>(128, 7)));
    std::vector<int> failures(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; i++) {
                auto own = mtsarray::Array::full<int32_t>(DLDevice{kDLCPU, 0}, {16, 8}, t);
                std::vector<mts_data_movement_t> movements = {{static_cast<uintptr_t>(i % 16), 0, 0, 0, 8}};
                const auto& raw = own.get();
                if (raw.move_data(raw.ptr, shared.get().ptr, movements.data(), 1) != MTS_SUCCESS) {
                    failures[t]++;
                }
                auto values = from_bytes<int32_t>(read_bytes(own));
                if (values[0] != 7 || values[8] != t) {
                    failures[t]++;
                }
                const uintptr_t wrong[] = {static_cast<uintptr_t>(t + 1000)};
                auto& mutable_raw = const_cast<mts_array_t&>(raw);
                if (mutable_raw.reshape(mutable_raw.ptr, wrong, 1) != MTS_CALLBACK_ERROR ||
                    last_error().find("can not reshape to [" + std::to_string(t + 1000) + "]") == std::string::npos) {
                    failures[t]++;
                }
            }
        });
    }
    for (auto& thread : threads) {
        thread.join();
    }
    EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
