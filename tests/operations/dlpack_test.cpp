// DLPack export (as_dlpack) and import (mtsarray_from_dlpack and the
// from_dlpack callback): versions, flags, ownership (deleters run exactly
// once, exports keep the data alive), strides, and every rejected tensor.

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

// ---- a producer of DLPack tensors that counts its deleter calls ---------------

struct Producer {
    DLManagedTensorVersioned managed;
    std::vector<uint8_t> storage;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
    int* deleted;

    /// A tensor over a copy of `storage`; data points at `storage.data() +
    /// data_offset` and byte_offset is added on top.
    static DLManagedTensorVersioned* make(std::vector<uint8_t> storage, DLDataType dtype, std::vector<int64_t> shape,
                                          std::vector<int64_t> strides, int* deleted, size_t data_offset = 0,
                                          uint64_t byte_offset = 0, uint64_t flags = 0) {
        auto* self = new Producer{};
        self->storage = std::move(storage);
        self->shape = std::move(shape);
        self->strides = std::move(strides);
        self->deleted = deleted;
        auto& managed = self->managed;
        managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        managed.manager_ctx = self;
        managed.deleter = [](DLManagedTensorVersioned* tensor) {
            auto* self = static_cast<Producer*>(tensor->manager_ctx);
            *self->deleted += 1;
            delete self;
        };
        managed.flags = flags;
        managed.dl_tensor.data = self->storage.empty() ? nullptr : self->storage.data() + data_offset;
        managed.dl_tensor.device = DLDevice{kDLCPU, 0};
        managed.dl_tensor.ndim = static_cast<int32_t>(self->shape.size());
        managed.dl_tensor.dtype = dtype;
        managed.dl_tensor.shape = self->shape.empty() ? nullptr : self->shape.data();
        managed.dl_tensor.strides = self->strides.empty() ? nullptr : self->strides.data();
        managed.dl_tensor.byte_offset = byte_offset;
        return &managed;
    }

    static const void* data_of(DLManagedTensorVersioned* tensor) {
        return static_cast<const uint8_t*>(tensor->dl_tensor.data) + tensor->dl_tensor.byte_offset;
    }
};

std::vector<double> iota_doubles(size_t count, double start = 0.0) {
    std::vector<double> values(count);
    std::iota(values.begin(), values.end(), start);
    return values;
}

DLManagedTensorVersioned* export_of(const mts_array_t& array, DLDevice device = DLDevice{kDLCPU, 0},
                                    const int64_t* stream = nullptr) {
    DLManagedTensorVersioned* tensor = nullptr;
    EXPECT_EQ(array.as_dlpack(array.ptr, &tensor, device, stream, dlpack_version()), MTS_SUCCESS) << last_error();
    return tensor;
}

void* data_of(const mts_array_t& array) {
    void* data = nullptr;
    EXPECT_EQ(mtsarray_data(&array, &data), MTS_SUCCESS) << last_error();
    return data;
}

int wrap_deleted = 0;
void count_wrap_deleter(void* context) {
    wrap_deleted += 1;
    *static_cast<int*>(context) += 1;
}

// ---- export -----------------------------------------------------------------------

class Export : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_AVAILABLE(GetParam()); }
    DLDevice device() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(AllBackends, Export, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

TEST_P(Export, DescribesTheArray) {
    auto values = iota_doubles(24);
    auto array = array_from_bytes(device(), float64(), {2, 3, 4}, to_bytes(values));
    auto* tensor = export_of(array.get(), device());
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->version.major, static_cast<uint32_t>(DLPACK_MAJOR_VERSION));
    EXPECT_EQ(tensor->version.minor, static_cast<uint32_t>(DLPACK_MINOR_VERSION));
    EXPECT_NE(tensor->deleter, nullptr);
    EXPECT_EQ(tensor->flags, 0u) << "a same-device export is zero-copy and writable";

    const auto& dl = tensor->dl_tensor;
    EXPECT_EQ(dl.device.device_type, device().device_type);
    EXPECT_EQ(dl.device.device_id, device().device_id);
    EXPECT_TRUE(same_dtype(dl.dtype, float64()));
    ASSERT_EQ(dl.ndim, 3);
    ASSERT_NE(dl.shape, nullptr);
    ASSERT_NE(dl.strides, nullptr) << "strides must never be NULL when ndim > 0";
    EXPECT_EQ(std::vector<int64_t>(dl.shape, dl.shape + 3), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(std::vector<int64_t>(dl.strides, dl.strides + 3), (std::vector<int64_t>{12, 4, 1}));
    EXPECT_EQ(static_cast<uint8_t*>(dl.data) + dl.byte_offset, data_of(array.get()));
    tensor->deleter(tensor);

    // 1-d and size-1 axes also get explicit strides
    auto vector = mtsarray::Array::zeros(device(), float32(), {1, 5, 1});
    tensor = export_of(vector.get(), device());
    ASSERT_NE(tensor->dl_tensor.strides, nullptr);
    EXPECT_EQ(tensor->dl_tensor.strides[1], 1);
    EXPECT_EQ(tensor->dl_tensor.strides[0], 5);
    tensor->deleter(tensor);
}

TEST_P(Export, IsCopiedExactlyWhenTheDeviceChanges) {
    auto values = iota_doubles(6, 1.5);
    auto array = array_from_bytes(device(), float64(), {2, 3}, to_bytes(values));

    auto* same = export_of(array.get(), device());
    EXPECT_EQ(same->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    same->deleter(same);

    auto* on_cpu = export_of(array.get(), DLDevice{kDLCPU, 0});
    ASSERT_NE(on_cpu, nullptr);
    EXPECT_EQ(on_cpu->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ((on_cpu->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0, device().device_type != kDLCPU);
    EXPECT_EQ(std::memcmp(Producer::data_of(on_cpu), values.data(), 6 * sizeof(double)), 0);
    on_cpu->deleter(on_cpu);

    // a CPU array exported to this device
    auto host = array_from_bytes(DLDevice{kDLCPU, 0}, float64(), {2, 3}, to_bytes(values));
    auto* on_device = export_of(host.get(), device());
    ASSERT_NE(on_device, nullptr);
    EXPECT_EQ(on_device->dl_tensor.device.device_type, device().device_type);
    EXPECT_EQ((on_device->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0, device().device_type != kDLCPU);
    // import the export back: the values survive the round trip
    auto back = mtsarray::Array::from_dlpack(on_device);
    EXPECT_EQ(from_bytes<double>(read_bytes(back)), values);
}

TEST_P(Export, KeepsTheDataAliveAfterTheArrayIsDestroyed) {
    auto values = iota_doubles(8, -3.0);
    auto array = array_from_bytes(device(), float64(), {8}, to_bytes(values));
    auto* tensor = export_of(array.get(), device());
    ASSERT_NE(tensor, nullptr);
    { auto gone = std::move(array); }  // destroy the array

    // the export still reads the data: import it (zero-copy) and read back
    auto again = mtsarray::Array::from_dlpack(tensor);
    EXPECT_EQ(from_bytes<double>(read_bytes(again)), values);
}

TEST(ExportCpu, IsWritableAndZeroCopy) {
    auto array = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {3, 4});
    auto* tensor = export_of(array.get());
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->flags, 0u);
    EXPECT_EQ(tensor->dl_tensor.data, array.data());
    static_cast<double*>(tensor->dl_tensor.data)[5] = 42.0;
    tensor->deleter(tensor);

    auto values = from_bytes<double>(read_bytes(array));
    EXPECT_EQ(values[5], 42.0);
    EXPECT_EQ(std::count(values.begin(), values.end(), 0.0), 11);
}

TEST(ExportCpu, WrapDeleterRunsOnceAfterTheLastExport) {
    std::vector<double> memory = iota_doubles(6);
    int deleted = 0;
    wrap_deleted = 0;
    auto array = mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, float64(), {2, 3}, count_wrap_deleter,
                                       &deleted);
    EXPECT_EQ(array.data(), memory.data());
    auto* first = export_of(array.get());
    auto* second = export_of(array.get());
    EXPECT_EQ(first->dl_tensor.data, memory.data());
    { auto gone = std::move(array); }
    EXPECT_EQ(deleted, 0);
    first->deleter(first);
    EXPECT_EQ(deleted, 0);
    EXPECT_EQ(static_cast<double*>(second->dl_tensor.data)[4], 4.0);
    second->deleter(second);
    EXPECT_EQ(deleted, 1);
    EXPECT_EQ(wrap_deleted, 1);

    // no export: the deleter runs with the array
    auto plain = mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, float64(), {6}, count_wrap_deleter,
                                       &deleted);
    { auto gone = std::move(plain); }
    EXPECT_EQ(deleted, 2);

    // a failed wrap does not take the memory: the deleter is not called
    mts_array_t raw = {};
    const uintptr_t shape[] = {6};
    ASSERT_EQ(mtsarray_wrap(memory.data(), DLDevice{kDLCPU, 0}, make_dtype(kDLFloat, 4), shape, 1,
                            count_wrap_deleter, &deleted, &raw),
              MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("sub-byte"), std::string::npos) << last_error();
    ASSERT_EQ(mtsarray_wrap(nullptr, DLDevice{kDLCPU, 0}, float64(), shape, 1, count_wrap_deleter, &deleted, &raw),
              MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("data is NULL for a non-empty array"), std::string::npos) << last_error();
    EXPECT_EQ(deleted, 2);
    EXPECT_EQ(raw.ptr, nullptr);

    // NULL data is fine for an empty array
    const uintptr_t empty[] = {0, 3};
    ASSERT_EQ(mtsarray_wrap(nullptr, DLDevice{kDLCPU, 0}, float64(), empty, 2, count_wrap_deleter, &deleted, &raw),
              MTS_SUCCESS)
        << last_error();
    raw.destroy(raw.ptr);
    EXPECT_EQ(deleted, 3);
}

TEST(ExportCpu, RejectsOtherMajorVersions) {
    auto array = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2});
    const auto& raw = array.get();
    for (uint32_t major : {0u, 2u}) {
        DLManagedTensorVersioned* tensor = reinterpret_cast<DLManagedTensorVersioned*>(0x1);
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, DLPackVersion{major, 0}),
                  MTS_CALLBACK_ERROR);
        EXPECT_EQ(tensor, reinterpret_cast<DLManagedTensorVersioned*>(0x1)) << "output written on error";
        EXPECT_NE(last_error().find("the consumer supports DLPack " + std::to_string(major) +
                                    ".0, mtsarray only exports DLPack 1.x"),
                  std::string::npos)
            << last_error();
    }
    // any 1.x consumer is served
    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, DLPackVersion{1, 0}), MTS_SUCCESS)
        << last_error();
    EXPECT_EQ(tensor->version.major, 1u);
    tensor->deleter(tensor);
}

TEST(ExportCpu, UnavailableDevicesAreErrors) {
    auto array = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2});
    const auto& raw = array.get();
    auto check = [&](DLDevice device, const std::string& expected) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, device, nullptr, dlpack_version()), MTS_CALLBACK_ERROR);
        EXPECT_EQ(tensor, nullptr);
        EXPECT_NE(last_error().find(expected), std::string::npos) << last_error();
        EXPECT_NE(last_error().find("as_dlpack"), std::string::npos) << last_error();
    };
    for (auto type : {kDLCUDA, kDLROCM, kDLCUDAHost}) {
        if (!backend_available(type)) {
            check(DLDevice{type, 0}, mtsarray_backend_unavailable_reason(type));
        }
    }
    check(DLDevice{kDLOpenCL, 0}, "mtsarray has no backend for opencl devices");
    check(DLDevice{static_cast<DLDeviceType>(99), 0}, "mtsarray has no backend for device type 99");
    check(DLDevice{kDLCPU, 1}, "invalid CPU device id 1, expected 0");
}

// ---- import -----------------------------------------------------------------------

/// Imports through mtsarray_from_dlpack, or through the from_dlpack callback
/// of an existing array (of another dtype: the new array takes the tensor's).
class Import : public ::testing::TestWithParam<bool> {
protected:
    mts_status_t import(DLManagedTensorVersioned* tensor, mts_array_t* result) {
        if (!GetParam()) {
            return mtsarray_from_dlpack(tensor, result);
        }
        const auto& raw = prototype_.get();
        return raw.from_dlpack(raw.ptr, tensor, result);
    }

    mtsarray::Array import_ok(DLManagedTensorVersioned* tensor) {
        mts_array_t result = {};
        EXPECT_EQ(import(tensor, &result), MTS_SUCCESS) << last_error();
        return mtsarray::Array(result);
    }

    void expect_rejected(DLManagedTensorVersioned* tensor, int* deleted, const std::string& expected) {
        const int before = *deleted;
        mts_array_t result;
        std::memset(&result, 0xCD, sizeof(result));
        const auto untouched = result;
        reset_last_error();
        const auto status = import(tensor, &result);
        if (status == MTS_SUCCESS) {
            ADD_FAILURE() << "the tensor was accepted, expected an error containing: " << expected;
            result.destroy(result.ptr);
            EXPECT_EQ(*deleted, before + 1);
            return;
        }
        EXPECT_EQ(status, MTS_CALLBACK_ERROR);
        EXPECT_EQ(*deleted, before + 1) << "the deleter must run exactly once, also on errors";
        EXPECT_NE(last_error().find(expected), std::string::npos) << last_error();
        EXPECT_NE(last_error().find(GetParam() ? "from_dlpack" : "mtsarray_from_dlpack"), std::string::npos)
            << last_error();
        EXPECT_EQ(last_error_origin(), "mtsarray");
        EXPECT_EQ(std::memcmp(&result, &untouched, sizeof(result)), 0) << "output written on error";
    }

    mtsarray::Array prototype_ = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, make_dtype(kDLInt, 8), {1});
};

INSTANTIATE_TEST_SUITE_P(BothEntryPoints, Import, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return std::string(info.param ? "callback" : "c_api");
                         });

TEST_P(Import, ContiguousWritableIsZeroCopy) {
    int deleted = 0;
    auto values = iota_doubles(12);
    auto* tensor = Producer::make(to_bytes(values), float64(), {3, 4}, {4, 1}, &deleted);
    const void* data = Producer::data_of(tensor);
    {
        auto array = import_ok(tensor);
        EXPECT_EQ(array.data(), data);
        EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{3, 4}));
        EXPECT_TRUE(same_dtype(array.dtype(), float64()));
        EXPECT_EQ(array.device().device_type, kDLCPU);
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), values);

        // writes go to the producer's memory
        static_cast<double*>(array.data())[0] = -1.0;
        EXPECT_EQ(static_cast<const double*>(data)[0], -1.0);

        // an export outlives the array; the producer's deleter waits for it
        auto* exported = export_of(array.get());
        EXPECT_EQ(exported->dl_tensor.data, data);
        { auto gone = std::move(array); }
        EXPECT_EQ(deleted, 0);
        exported->deleter(exported);
        EXPECT_EQ(deleted, 1);
    }
    EXPECT_EQ(deleted, 1);
}

TEST_P(Import, HonoursByteOffsetAndLegacyNullStrides) {
    int deleted = 0;
    auto values = iota_doubles(10);
    // data at storage + 8, byte_offset 16: the first element is values[3]
    auto* tensor = Producer::make(to_bytes(values), float64(), {2, 3}, {}, &deleted, 8, 16);
    ASSERT_EQ(tensor->dl_tensor.strides, nullptr);
    const void* first = Producer::data_of(tensor);
    {
        auto array = import_ok(tensor);
        EXPECT_EQ(array.data(), first);
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{3, 4, 5, 6, 7, 8}));
        EXPECT_EQ(deleted, 0);
    }
    EXPECT_EQ(deleted, 1);

    // a 0-d tensor (shape NULL) with byte_offset
    auto* scalar = Producer::make(to_bytes(values), float64(), {}, {}, &deleted, 0, 72);
    {
        auto array = import_ok(scalar);
        EXPECT_TRUE(array.shape().empty());
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{9}));
    }
    EXPECT_EQ(deleted, 2);

    // size-1 axes may have any stride and are still contiguous
    auto* odd = Producer::make(to_bytes(values), float64(), {2, 1, 5}, {5, 12345, 1}, &deleted);
    const void* odd_data = Producer::data_of(odd);
    {
        auto array = import_ok(odd);
        EXPECT_EQ(array.data(), odd_data);
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), values);
    }
    EXPECT_EQ(deleted, 3);
}

TEST_P(Import, NonContiguousIsCopiedAndReleasedAtOnce) {
    int deleted = 0;
    auto values = iota_doubles(12);  // a 3x4 row-major matrix

    // transposed view: shape [4, 3], strides [1, 4]
    auto* transposed = Producer::make(to_bytes(values), float64(), {4, 3}, {1, 4}, &deleted);
    auto array = import_ok(transposed);
    EXPECT_EQ(deleted, 1) << "a copy releases the producer's tensor right away";
    EXPECT_EQ(from_bytes<double>(read_bytes(array)),
              (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));

    // negative strides: reversed rows (data points at the last row)
    auto* reversed = Producer::make(to_bytes(values), float64(), {3, 4}, {-4, 1}, &deleted, 8 * 8);
    array = import_ok(reversed);
    EXPECT_EQ(deleted, 2);
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}));

    // fully reversed 1-d
    auto* backwards = Producer::make(to_bytes(values), float64(), {12}, {-1}, &deleted, 11 * 8);
    array = import_ok(backwards);
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));

    // zero strides (broadcast): one row repeated
    auto* broadcast = Producer::make(to_bytes(values), float64(), {3, 4}, {0, 1}, &deleted, 4 * 8);
    array = import_ok(broadcast);
    EXPECT_EQ(deleted, 4);
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7}));

    // every other column, with a byte offset
    auto* strided = Producer::make(to_bytes(values), float64(), {3, 2}, {4, 2}, &deleted, 0, 8);
    array = import_ok(strided);
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{1, 3, 5, 7, 9, 11}));

    // a larger transposed int16 tensor (several tiles)
    std::vector<int16_t> big(130 * 70);
    std::iota(big.begin(), big.end(), int16_t(0));
    auto* big_transposed = Producer::make(to_bytes(big), make_dtype(kDLInt, 16), {70, 130}, {1, 70}, &deleted);
    array = import_ok(big_transposed);
    auto read = from_bytes<int16_t>(read_bytes(array));
    ASSERT_EQ(read.size(), big.size());
    bool all_equal = true;
    for (size_t i = 0; i < 70 && all_equal; i++) {
        for (size_t j = 0; j < 130; j++) {
            all_equal = all_equal && read[i * 130 + j] == big[j * 70 + i];
        }
    }
    EXPECT_TRUE(all_equal);
    EXPECT_EQ(deleted, 6);
}

// DLPack lets the stride of an axis of one element be anything; strides
// whose byte offsets do not fit in int64_t describe no real memory and are
// refused before anything is read (the fuzzer found a 2^63 - 1 stride on a
// size-1 axis overflowing the byte strides of the CPU copy).
TEST_P(Import, StridesOfSizeOneAxesAreIgnoredAndHugeSpansRefused) {
    int deleted = 0;
    const auto values = iota_doubles(6);
    const int64_t huge = std::numeric_limits<int64_t>::max();
    const int64_t most_negative = std::numeric_limits<int64_t>::min();

    // a transposed 3x2 view with two size-1 axes carrying absurd strides
    auto* odd = Producer::make(to_bytes(values), float64(), {1, 3, 1, 2}, {huge, 1, most_negative, 3}, &deleted);
    auto array = import_ok(odd);
    EXPECT_EQ(deleted, 1);
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{1, 3, 1, 2}));
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), (std::vector<double>{0, 3, 1, 4, 2, 5}));
    // complex128: the widest element, the byte strides are 16x the strides
    auto* wide = Producer::make(repeat(to_bytes(values), 2), make_dtype(kDLComplex, 128), {1, 3, 2}, {huge, 1, 3},
                                &deleted);
    array = import_ok(wide);
    EXPECT_EQ(deleted, 2);

    // an axis of two elements whose stride spans more than 2^63 bytes
    auto* span = Producer::make(to_bytes(values), float64(), {2, 3}, {huge / 4, 1}, &deleted);
    expect_rejected(span, &deleted, "invalid DLPack tensor: its strides span more than 2^63 bytes");
    auto* negative = Producer::make(to_bytes(values), float64(), {2, 3}, {most_negative, 1}, &deleted);
    expect_rejected(negative, &deleted, "invalid DLPack tensor: its strides span more than 2^63 bytes");
    auto* many_axes = Producer::make(to_bytes(values), make_dtype(kDLInt, 8), {2, 2, 2},
                                     {huge / 2, huge / 2, 1}, &deleted);
    expect_rejected(many_axes, &deleted, "invalid DLPack tensor: its strides span more than 2^63 bytes");
}

TEST_P(Import, ReadOnlyIsCopied) {
    int deleted = 0;
    auto values = iota_doubles(6);
    auto* tensor =
        Producer::make(to_bytes(values), float64(), {6}, {1}, &deleted, 0, 0, DLPACK_FLAG_BITMASK_READ_ONLY);
    const void* data = Producer::data_of(tensor);
    auto array = import_ok(tensor);
    EXPECT_EQ(deleted, 1);
    EXPECT_NE(array.data(), data);
    EXPECT_EQ(from_bytes<double>(read_bytes(array)), values);
    // the copy is ours to write
    auto* exported = export_of(array.get());
    EXPECT_EQ(exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
    exported->deleter(exported);
}

TEST_P(Import, EmptyTensors) {
    int deleted = 0;
    auto* tensor = Producer::make({}, float32(), {0, 3}, {3, 1}, &deleted);
    ASSERT_EQ(tensor->dl_tensor.data, nullptr);
    {
        auto array = import_ok(tensor);
        EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{0, 3}));
        EXPECT_TRUE(read_bytes(array).empty());
    }
    EXPECT_EQ(deleted, 1);

    // an empty tensor has no element out of order, whatever its strides
    auto* strided = Producer::make({}, float32(), {3, 0}, {7, 5}, &deleted);
    {
        auto array = import_ok(strided);
        EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{3, 0}));
        EXPECT_TRUE(read_bytes(array).empty());
    }
    EXPECT_EQ(deleted, 2);
}

TEST_P(Import, RejectedTensorsAreReleasedOnce) {
    int deleted = 0;
    const auto values = to_bytes(iota_doubles(4));
    auto make = [&](DLDataType dtype = float64(), std::vector<int64_t> shape = {4}) {
        return Producer::make(values, dtype, std::move(shape), {}, &deleted);
    };

    auto* version2 = make();
    version2->version = {2, 0};
    expect_rejected(version2, &deleted, "unsupported DLPack version 2.0, mtsarray reads DLPack 1.x");
    auto* version0 = make();
    version0->version = {0, 8};
    expect_rejected(version0, &deleted, "unsupported DLPack version 0.8");

    auto* negative_ndim = make();
    negative_ndim->dl_tensor.ndim = -1;
    expect_rejected(negative_ndim, &deleted, "invalid DLPack tensor: ndim = -1");
    auto* huge_ndim = make();
    huge_ndim->dl_tensor.ndim = 1000;
    huge_ndim->dl_tensor.shape = nullptr;
    expect_rejected(huge_ndim, &deleted, "invalid DLPack tensor: shape is NULL with ndim = 1000");

    auto* null_shape = make();
    null_shape->dl_tensor.shape = nullptr;
    expect_rejected(null_shape, &deleted, "invalid DLPack tensor: shape is NULL with ndim = 1");

    expect_rejected(make(float64(), {2, -2}), &deleted, "invalid DLPack tensor: shape[1] = -2");

    expect_rejected(make(make_dtype(kDLFloat4_e2m1fn, 4)), &deleted,
                    "unsupported dtype float4_e2m1fn: sub-byte types (fewer than 8 bits per element) are not "
                    "supported");
    expect_rejected(make(make_dtype(kDLFloat6_e3m2fn, 6)), &deleted, "unsupported dtype float6_e3m2fn: sub-byte");
    expect_rejected(make(make_dtype(kDLInt, 4)), &deleted, "unsupported dtype int4: sub-byte");
    expect_rejected(make(make_dtype(kDLBool, 1)), &deleted, "unsupported dtype bool(1 bits): sub-byte");
    expect_rejected(make(make_dtype(kDLFloat, 32, 2)), &deleted,
                    "unsupported dtype float32x2: only lanes == 1 is supported");
    expect_rejected(make(make_dtype(kDLFloat, 8)), &deleted, "unsupported dtype float8: this width does not exist");
    expect_rejected(make(make_dtype(kDLOpaqueHandle, 64)), &deleted, "unsupported dtype opaque_handle64");
    expect_rejected(make(make_dtype(42, 32)), &deleted, "unsupported dtype unknown dtype (code 42, 32 bits)");

    auto* unknown_device = make();
    unknown_device->dl_tensor.device = DLDevice{static_cast<DLDeviceType>(99), 0};
    expect_rejected(unknown_device, &deleted, "mtsarray has no backend for device type 99");
    auto* opencl = make();
    opencl->dl_tensor.device = DLDevice{kDLOpenCL, 0};
    expect_rejected(opencl, &deleted, "mtsarray has no backend for opencl devices");
    auto* cpu1 = make();
    cpu1->dl_tensor.device = DLDevice{kDLCPU, 1};
    expect_rejected(cpu1, &deleted, "invalid CPU device id 1");
    for (auto type : {kDLCUDA, kDLROCM, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost}) {
        if (!backend_available(type)) {
            auto* gpu = make();
            gpu->dl_tensor.device = DLDevice{type, 0};
            expect_rejected(gpu, &deleted, mtsarray_backend_unavailable_reason(type));
        }
    }

    auto* null_data = make();
    null_data->dl_tensor.data = nullptr;
    expect_rejected(null_data, &deleted, "invalid DLPack tensor: data is NULL");

    auto* too_large = make(float64(), {int64_t(1) << 62, 8});
    expect_rejected(too_large, &deleted, "is too large: its size in bytes overflows");

    // NULL tensor: nothing to release
    mts_array_t result = {};
    ASSERT_EQ(import(nullptr, &result), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("the DLPack tensor is NULL"), std::string::npos) << last_error();

    // a NULL output: the tensor is still released
    const int before = deleted;
    if (GetParam()) {
        const auto& raw = prototype_.get();
        ASSERT_EQ(raw.from_dlpack(raw.ptr, make(), nullptr), MTS_CALLBACK_ERROR);
    } else {
        ASSERT_EQ(mtsarray_from_dlpack(make(), nullptr), MTS_CALLBACK_ERROR);
    }
    EXPECT_EQ(deleted, before + 1);
    EXPECT_NE(last_error().find("is NULL"), std::string::npos) << last_error();
}

// The host memory of a GPU (page-locked, managed): a strided or read-only
// tensor there is copied into a C-contiguous array of the same device type,
// by the host, and the producer's tensor is released once the copy is made.
class ImportGpuHostMemory : public ::testing::TestWithParam<DLDeviceType> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_PRESENT((DLDevice{GetParam(), 0})); }
};

INSTANTIATE_TEST_SUITE_P(PageLockedAndManaged, ImportGpuHostMemory,
                         ::testing::Values(kDLCUDAHost, kDLCUDAManaged),
                         [](const ::testing::TestParamInfo<DLDeviceType>& info) {
                             return std::string(info.param == kDLCUDAHost ? "page_locked" : "managed");
                         });

TEST_P(ImportGpuHostMemory, StridedAndReadOnlyTensorsAreCopied) {
    const DLDevice device = {GetParam(), 0};
    int deleted = 0;
    const auto values = iota_doubles(12);  // a 3x4 row-major matrix
    const std::vector<double> transposed_values = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    struct Case {
        const char* name;
        std::vector<int64_t> shape;
        std::vector<int64_t> strides;
        uint64_t flags;
        std::vector<double> expected;
    };
    const std::vector<Case> cases = {
        {"transposed", {4, 3}, {1, 4}, 0, transposed_values},
        {"every other column", {3, 2}, {4, 2}, 0, {0, 2, 4, 6, 8, 10}},
        {"read-only", {12}, {1}, DLPACK_FLAG_BITMASK_READ_ONLY, values},
        {"read-only and transposed", {4, 3}, {1, 4}, DLPACK_FLAG_BITMASK_READ_ONLY, transposed_values},
    };
    for (const auto& tensor_case : cases) {
        SCOPED_TRACE(tensor_case.name);
        auto* tensor = Producer::make(to_bytes(values), float64(), tensor_case.shape, tensor_case.strides, &deleted,
                                      0, 0, tensor_case.flags);
        tensor->dl_tensor.device = device;
        const void* data = Producer::data_of(tensor);
        const int before = deleted;
        mts_array_t result = {};
        ASSERT_EQ(mtsarray_from_dlpack(tensor, &result), MTS_SUCCESS) << last_error();
        mtsarray::Array array(result);
        EXPECT_EQ(deleted, before + 1) << "the copy releases the producer's tensor right away";
        EXPECT_NE(array.data(), data);
        EXPECT_EQ(array.device().device_type, device.device_type);
        EXPECT_EQ(array.shape(), std::vector<uintptr_t>(tensor_case.shape.begin(), tensor_case.shape.end()));
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), tensor_case.expected);
    }
}

// One limit on the axes for everything (DLPack's int32): an array of many
// axes that mtsarray makes comes back through its own export.
TEST(ImportRoundTrip, ManyAxesComeBack) {
    for (size_t axes : {65, 100, 300}) {
        std::vector<uintptr_t> shape(axes, 1);
        shape[0] = 3;
        shape[axes - 1] = 2;
        auto array = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), shape);
        const mts_array_t& raw = array.get();
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, DLPackVersion{1, 0}), MTS_SUCCESS)
            << last_error();
        ASSERT_EQ(tensor->dl_tensor.ndim, static_cast<int32_t>(axes));
        mts_array_t imported = {};
        ASSERT_EQ(mtsarray_from_dlpack(tensor, &imported), MTS_SUCCESS) << axes << " axes: " << last_error();
        EXPECT_EQ(shape_of(imported), shape);
        imported.destroy(imported.ptr);
    }
}

TEST(ImportRoundTrip, ExportThenImportSharesTheData) {
    auto values = iota_doubles(6);
    auto array = array_from_bytes(DLDevice{kDLCPU, 0}, float64(), {2, 3}, to_bytes(values));
    auto* tensor = export_of(array.get());
    auto imported = mtsarray::Array::from_dlpack(tensor);
    EXPECT_EQ(imported.data(), array.data());
    { auto gone = std::move(array); }
    EXPECT_EQ(from_bytes<double>(read_bytes(imported)), values);
}

}  // namespace
