#pragma once
// Shared fixtures for the GoogleTest suites: the backends to run every
// contract test on (CPU always, CUDA and ROCm when compiled in), the dtypes
// mtsarray stores, and functions that move bytes between the host and any
// array. A TEST_P body is written once and instantiated over backends
// (RMM / Ginkgo habit); device results are read back to the host through
// the array's own as_dlpack(cpu) and compared with a host reference.
//
// Device cases skip with the probe's reason when the backend has no device:
// they never pass vacuously.

#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <metatensor.h>

#include "mtsarray.h"
#include "mtsarray.hpp"
#include "mtsarray/config.h"
#if MTSARRAY_TEST_SIMULATED_GPU
#include "support/simulated_runtime.hpp"
#endif

/// Readable test parameters ("cuda:0" instead of raw bytes). DLDevice lives
/// in the global namespace, where gtest looks for PrintTo.
inline void PrintTo(const DLDevice& device, std::ostream* stream) {
    *stream << static_cast<int>(device.device_type) << ":" << device.device_id;
}

namespace mtsarray_test {

// ---- backends --------------------------------------------------------------

/// Whether kDLCUDA is served by the simulated runtime in this program
/// (support/simulated_runtime.hpp: programs built with
/// MTSARRAY_TEST_SIMULATED_GPU, when no real GPU is present).
inline bool simulated_gpu() {
#if MTSARRAY_TEST_SIMULATED_GPU
    return simulated_gpu_in_use();
#else
    return false;
#endif
}

/// Every device of `type` the runtime reports (mtsarray_device_count), or
/// device 0 alone when it reports none, so that its cases skip with the
/// probe's reason instead of vanishing.
inline void add_every_device(std::vector<DLDevice>& devices, DLDeviceType type) {
    int32_t count = 0;
    if (mtsarray_device_count(type, &count) != MTS_SUCCESS || count < 1) {
        count = 1;
    }
    for (int32_t id = 0; id < count; id++) {
        devices.push_back(DLDevice{type, id});
    }
}

/// The devices every contract test runs on: the CPU, and every CUDA device
/// (real, or simulated: MTSARRAY_SIM_DEVICES of them) and ROCm device.
inline std::vector<DLDevice> test_devices() {
    std::vector<DLDevice> devices = {DLDevice{kDLCPU, 0}};
    if (MTSARRAY_HAS_CUDA || simulated_gpu()) {
        add_every_device(devices, kDLCUDA);
    }
#if MTSARRAY_HAS_HIP
    add_every_device(devices, kDLROCM);
#endif
    return devices;
}

inline std::string device_name(DLDevice device) {
    switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return (simulated_gpu() ? "sim" : "cuda") + std::to_string(device.device_id);
    case kDLROCM: return "rocm" + std::to_string(device.device_id);
    default: return "device" + std::to_string(static_cast<int>(device.device_type));
    }
}

inline bool backend_available(DLDeviceType type) {
    bool available = false;
    EXPECT_EQ(mtsarray_backend_available(type, &available), MTS_SUCCESS);
    return available;
}

/// Skips the current test with the probe's reason when `device` can not be
/// used in this process (no GPU, no driver). Checks that a missing backend
/// always comes with a reason, and an available one with none.
#define MTSARRAY_SKIP_UNLESS_AVAILABLE(device)                                             \
    do {                                                                                   \
        const DLDevice device_to_check_ = (device);                                        \
        const std::string reason_ = mtsarray_backend_unavailable_reason(device_to_check_.device_type); \
        if (!::mtsarray_test::backend_available(device_to_check_.device_type)) {           \
            ASSERT_FALSE(reason_.empty()) << "an unavailable backend must say why";        \
            GTEST_SKIP() << ::mtsarray_test::device_name(device_to_check_) << ": " << reason_; \
        }                                                                                  \
        ASSERT_TRUE(reason_.empty()) << reason_;                                           \
    } while (false)

/// MTSARRAY_SKIP_UNLESS_AVAILABLE, and skips too when `device` is not one
/// of the devices of its backend in this process (a second GPU on a machine
/// with one), with the error that says so.
#define MTSARRAY_SKIP_UNLESS_PRESENT(device)                                                   \
    do {                                                                                       \
        const DLDevice present_device_ = (device);                                             \
        MTSARRAY_SKIP_UNLESS_AVAILABLE(present_device_);                                       \
        const std::string missing_ = ::mtsarray_test::why_device_is_missing(present_device_);  \
        if (!missing_.empty()) {                                                               \
            GTEST_SKIP() << ::mtsarray_test::device_name(present_device_) << ": " << missing_; \
        }                                                                                      \
    } while (false)

/// Why an array can not be made on `device` of an available backend (the
/// library's error, naming the device count), or nothing.
inline std::string why_device_is_missing(DLDevice device) {
    mts_array_t probe = {};
    const uintptr_t shape[1] = {1};
    if (mtsarray_zeros(device, DLDataType{kDLFloat, 64, 1}, shape, 1, &probe) != MTS_SUCCESS) {
        const char* message = nullptr;
        mts_last_error(&message, nullptr, nullptr);
        return message == nullptr ? "no such device" : message;
    }
    probe.destroy(probe.ptr);
    return "";
}

// ---- dtypes ----------------------------------------------------------------

struct DType {
    DLDataType dtype;
    const char* name;
};

inline void PrintTo(const DType& dtype, std::ostream* stream) { *stream << dtype.name; }

inline DLDataType make_dtype(uint8_t code, uint8_t bits, uint16_t lanes = 1) {
    DLDataType dtype;
    dtype.code = code;
    dtype.bits = bits;
    dtype.lanes = lanes;
    return dtype;
}

/// Every dtype mtsarray stores.
inline std::vector<DType> all_dtypes() {
    return {
        {make_dtype(kDLInt, 8), "int8"},
        {make_dtype(kDLInt, 16), "int16"},
        {make_dtype(kDLInt, 32), "int32"},
        {make_dtype(kDLInt, 64), "int64"},
        {make_dtype(kDLUInt, 8), "uint8"},
        {make_dtype(kDLUInt, 16), "uint16"},
        {make_dtype(kDLUInt, 32), "uint32"},
        {make_dtype(kDLUInt, 64), "uint64"},
        {make_dtype(kDLFloat, 16), "float16"},
        {make_dtype(kDLFloat, 32), "float32"},
        {make_dtype(kDLFloat, 64), "float64"},
        {make_dtype(kDLBfloat, 16), "bfloat16"},
        {make_dtype(kDLBool, 8), "bool"},
        {make_dtype(kDLComplex, 64), "complex64"},
        {make_dtype(kDLComplex, 128), "complex128"},
        {make_dtype(kDLFloat8_e3m4, 8), "float8_e3m4"},
        {make_dtype(kDLFloat8_e4m3, 8), "float8_e4m3"},
        {make_dtype(kDLFloat8_e4m3b11fnuz, 8), "float8_e4m3b11fnuz"},
        {make_dtype(kDLFloat8_e4m3fn, 8), "float8_e4m3fn"},
        {make_dtype(kDLFloat8_e4m3fnuz, 8), "float8_e4m3fnuz"},
        {make_dtype(kDLFloat8_e5m2, 8), "float8_e5m2"},
        {make_dtype(kDLFloat8_e5m2fnuz, 8), "float8_e5m2fnuz"},
        {make_dtype(kDLFloat8_e8m0fnu, 8), "float8_e8m0fnu"},
    };
}

inline size_t element_size(DLDataType dtype) { return dtype.bits / 8; }

inline bool same_dtype(DLDataType a, DLDataType b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline DLDataType float64() { return make_dtype(kDLFloat, 64); }
inline DLDataType float32() { return make_dtype(kDLFloat, 32); }
inline DLDataType int32() { return make_dtype(kDLInt, 32); }

inline DLPackVersion dlpack_version() { return DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}; }

inline size_t product(const std::vector<uintptr_t>& shape) {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

// ---- errors ----------------------------------------------------------------

inline std::string last_error() {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    return message == nullptr ? std::string() : std::string(message);
}

inline std::string last_error_origin() {
    const char* origin = nullptr;
    mts_last_error(nullptr, &origin, nullptr);
    return origin == nullptr ? std::string() : std::string(origin);
}

/// Sets a sentinel last error, so that a test can tell a fresh message from
/// a stale one.
inline void reset_last_error() {
    mts_set_last_error("sentinel: no error yet", "mtsarray-tests", nullptr, nullptr);
}

// ---- bytes <-> arrays -------------------------------------------------------

inline std::vector<uintptr_t> shape_of(const mts_array_t& array) {
    const uintptr_t* shape = nullptr;
    uintptr_t count = 0;
    EXPECT_EQ(array.shape(array.ptr, &shape, &count), MTS_SUCCESS) << last_error();
    if (count == 0) {
        return {};
    }
    return std::vector<uintptr_t>(shape, shape + count);
}

inline DLDataType dtype_of(const mts_array_t& array) {
    DLDataType dtype = {};
    EXPECT_EQ(array.dtype(array.ptr, &dtype), MTS_SUCCESS) << last_error();
    return dtype;
}

inline DLDevice device_of(const mts_array_t& array) {
    DLDevice device = {};
    EXPECT_EQ(array.device(array.ptr, &device), MTS_SUCCESS) << last_error();
    return device;
}

/// The bytes of any array, read on the host through its own as_dlpack(cpu)
/// (whatever its device), in C order.
inline std::vector<uint8_t> read_bytes(const mts_array_t& array) {
    DLManagedTensorVersioned* tensor = nullptr;
    auto status = array.as_dlpack(array.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, dlpack_version());
    EXPECT_EQ(status, MTS_SUCCESS) << last_error();
    if (status != MTS_SUCCESS || tensor == nullptr) {
        return {};
    }
    const DLTensor& dl = tensor->dl_tensor;
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    size_t count = 1;
    for (int32_t axis = 0; axis < dl.ndim; axis++) {
        count *= static_cast<size_t>(dl.shape[axis]);
    }
    // our exports are always C-contiguous
    if (dl.ndim > 0) {
        EXPECT_NE(dl.strides, nullptr);
        int64_t expected = 1;
        for (int32_t axis = dl.ndim; axis-- > 0;) {
            if (dl.shape[axis] != 1 && count != 0) {
                EXPECT_EQ(dl.strides[axis], expected) << "axis " << axis;
            }
            expected *= dl.shape[axis];
        }
    }
    const size_t bytes = count * ((dl.dtype.bits * dl.dtype.lanes + 7) / 8);
    std::vector<uint8_t> result(bytes);
    if (bytes != 0) {
        std::memcpy(result.data(), static_cast<const uint8_t*>(dl.data) + dl.byte_offset, bytes);
    }
    tensor->deleter(tensor);
    return result;
}

inline std::vector<uint8_t> read_bytes(const mtsarray::Array& array) { return read_bytes(array.get()); }

/// A new array on `device` holding `bytes` (C order): the host bytes are
/// wrapped on the CPU, then copied onto the device with the `copy` callback.
inline mtsarray::Array array_from_bytes(DLDevice device, DLDataType dtype, const std::vector<uintptr_t>& shape,
                                        const std::vector<uint8_t>& bytes) {
    EXPECT_EQ(bytes.size(), product(shape) * element_size(dtype));
    std::vector<uint8_t> host = bytes;
    auto wrapped = mtsarray::Array::wrap(host.empty() ? nullptr : host.data(), DLDevice{kDLCPU, 0}, dtype, shape);
    return wrapped.copy(device);
}

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) {
        std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    return bytes;
}

template <typename T>
std::vector<T> from_bytes(const std::vector<uint8_t>& bytes) {
    std::vector<T> values(bytes.size() / sizeof(T));
    if (!values.empty()) {
        std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
    }
    return values;
}

inline std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t count) {
    std::vector<uint8_t> bytes(count);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& value : bytes) {
        value = static_cast<uint8_t>(byte(rng));
    }
    return bytes;
}

/// The element pattern `element` repeated `count` times.
inline std::vector<uint8_t> repeat(const std::vector<uint8_t>& element, size_t count) {
    std::vector<uint8_t> bytes;
    bytes.reserve(element.size() * count);
    for (size_t i = 0; i < count; i++) {
        bytes.insert(bytes.end(), element.begin(), element.end());
    }
    return bytes;
}

// ---- a foreign array for fill values ------------------------------------------

/// A minimal foreign (non-mtsarray) mts_array_t holding arbitrary bytes on the
/// CPU, exporting them through as_dlpack; counts how often it is destroyed so
/// that tests can check ownership rules (create must destroy its fill_value
/// exactly once, on success and on every error path).
struct ForeignArray {
    DLDataType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
    int* destroyed;             // incremented by destroy
    bool fail_as_dlpack = false;

    static mts_array_t make(DLDataType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes,
                            int* destroyed, bool fail_as_dlpack = false) {
        auto* self = new ForeignArray{dtype, std::move(shape), std::move(bytes), destroyed, fail_as_dlpack};
        mts_array_t array;
        std::memset(&array, 0, sizeof(array));
        array.ptr = self;
        array.destroy = [](void* pointer) {
            auto* self = static_cast<ForeignArray*>(pointer);
            *self->destroyed += 1;
            delete self;
        };
        array.as_dlpack = [](void* pointer, DLManagedTensorVersioned** result, DLDevice device,
                             const int64_t* stream, DLPackVersion) -> mts_status_t {
            auto* self = static_cast<ForeignArray*>(pointer);
            if (self->fail_as_dlpack || device.device_type != kDLCPU || stream != nullptr) {
                mts_set_last_error("ForeignArray refuses to export", "mtsarray-tests", nullptr, nullptr);
                return MTS_CALLBACK_ERROR;
            }
            auto* managed = new DLManagedTensorVersioned{};
            managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
            managed->manager_ctx = nullptr;
            managed->deleter = [](DLManagedTensorVersioned* self) { delete self; };
            managed->dl_tensor.data = self->bytes.data();
            managed->dl_tensor.device = DLDevice{kDLCPU, 0};
            managed->dl_tensor.ndim = static_cast<int32_t>(self->shape.size());
            managed->dl_tensor.dtype = self->dtype;
            managed->dl_tensor.shape = self->shape.empty() ? nullptr : self->shape.data();
            managed->dl_tensor.strides = nullptr;
            managed->dl_tensor.byte_offset = 0;
            *result = managed;
            return MTS_SUCCESS;
        };
        return array;
    }
};

// ---- parameter names ------------------------------------------------------------

inline std::string sanitize(std::string name) {
    for (auto& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) {
            c = '_';
        }
    }
    return name;
}

}  // namespace mtsarray_test
