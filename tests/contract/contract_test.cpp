// The mts_array_t contract, written once and run on every backend for every
// dtype mtsarray stores. Values are read back on the host through the
// array's own as_dlpack(cpu) and compared with a host reference.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

class Contract : public ::testing::TestWithParam<std::tuple<DLDevice, DType>> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_AVAILABLE(device()); }

    DLDevice device() const { return std::get<0>(GetParam()); }
    DLDataType dtype() const { return std::get<1>(GetParam()).dtype; }
    size_t size() const { return element_size(dtype()); }

    mtsarray::Array random_array(const std::vector<uintptr_t>& shape, std::vector<uint8_t>* bytes) {
        *bytes = random_bytes(rng_, product(shape) * size());
        return array_from_bytes(device(), dtype(), shape, *bytes);
    }

    std::vector<uint8_t> random_element() { return random_bytes(rng_, size()); }

    std::mt19937_64 rng_{20240611};
};

std::string contract_name(const ::testing::TestParamInfo<Contract::ParamType>& info) {
    return device_name(std::get<0>(info.param)) + "_" + sanitize(std::get<1>(info.param).name);
}

INSTANTIATE_TEST_SUITE_P(AllBackendsAllDtypes, Contract,
                         ::testing::Combine(::testing::ValuesIn(test_devices()), ::testing::ValuesIn(all_dtypes())),
                         contract_name);

bool same_device(DLDevice a, DLDevice b) { return a.device_type == b.device_type && a.device_id == b.device_id; }

// The suite runs on every GPU the runtime reports, not on device 0 alone:
// on the simulated runtime, MTSARRAY_SIM_DEVICES of them.
TEST(ContractDevices, EveryDeviceOfEachGpuBackendIsTested) {
    const auto devices = test_devices();
    for (DLDeviceType type : {kDLCUDA, kDLROCM}) {
        int32_t count = 0;
        ASSERT_EQ(mtsarray_device_count(type, &count), MTS_SUCCESS) << last_error();
        for (int32_t id = 0; id < count; id++) {
            const DLDevice device = {type, id};
            EXPECT_TRUE(std::any_of(devices.begin(), devices.end(),
                                    [&](DLDevice tested) { return same_device(tested, device); }))
                << device_name(device) << " is not among the contract suite's devices";
        }
    }
#if MTSARRAY_TEST_SIMULATED_GPU
    if (simulated_gpu()) {
        EXPECT_EQ(std::count_if(devices.begin(), devices.end(),
                                [](DLDevice tested) { return tested.device_type == kDLCUDA; }),
                  sim::device_count());
    }
#endif
}

// Naive reference for swap_axes on C-ordered bytes.
std::vector<uint8_t> swap_axes_reference(const std::vector<uint8_t>& bytes, const std::vector<uintptr_t>& shape,
                                         size_t element, size_t axis_1, size_t axis_2,
                                         std::vector<uintptr_t>* new_shape) {
    *new_shape = shape;
    std::swap((*new_shape)[axis_1], (*new_shape)[axis_2]);
    std::vector<uint8_t> result(bytes.size());
    const size_t count = product(shape);
    std::vector<uintptr_t> index(shape.size());
    for (size_t linear = 0; linear < count; linear++) {
        size_t rest = linear;
        for (size_t axis = shape.size(); axis-- > 0;) {
            index[axis] = rest % shape[axis];
            rest /= shape[axis];
        }
        std::swap(index[axis_1], index[axis_2]);
        size_t target = 0;
        for (size_t axis = 0; axis < shape.size(); axis++) {
            target = target * (*new_shape)[axis] + index[axis];
        }
        std::memcpy(result.data() + target * element, bytes.data() + linear * element, element);
    }
    return result;
}

// Overwrites every element of `array` (rank >= 2) with `source`'s, using
// move_data: a way to modify any array, on any device.
void overwrite(mtsarray::Array& array, const mtsarray::Array& source) {
    auto shape = array.shape();
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t sample = 0; sample < shape[0]; sample++) {
        movements.push_back({sample, sample, 0, 0, shape.back()});
    }
    const auto& output = array.get();
    ASSERT_EQ(output.move_data(output.ptr, source.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
        << last_error();
}

TEST_P(Contract, ZerosReportShapeDtypeDeviceAndHoldZeros) {
    const std::vector<uintptr_t> shape = {3, 4};
    auto array = mtsarray::Array::zeros(device(), dtype(), shape);
    EXPECT_EQ(array.shape(), shape);
    EXPECT_TRUE(same_dtype(array.dtype(), dtype()));
    EXPECT_TRUE(same_device(array.device(), device()));
    EXPECT_NE(array.data(), nullptr);

    bool ours = false;
    ASSERT_EQ(mtsarray_is_mtsarray(&array.get(), &ours), MTS_SUCCESS);
    EXPECT_TRUE(ours);

    EXPECT_EQ(read_bytes(array), std::vector<uint8_t>(12 * size(), 0));
}

// Zeros in memory that held something else a moment ago (freed and handed
// out again by the allocator), small and large (above the sizes the host
// allocator maps fresh from the kernel), and -0.0, which is no zero pattern.
TEST_P(Contract, ZerosInReusedMemoryAreZeros) {
    for (uintptr_t rows : {uintptr_t(3), uintptr_t(1) << 16, uintptr_t(1) << 20}) {
        const std::vector<uintptr_t> shape = {rows, 4};
        const std::vector<uint8_t> ones(element_size(dtype()), 0xFF);
        for (int round = 0; round < 3; round++) {
            mts_array_t raw = {};
            ASSERT_EQ(mtsarray_full(device(), dtype(), shape.data(), shape.size(), ones.data(), &raw), MTS_SUCCESS)
                << last_error();
            raw.destroy(raw.ptr);
            auto zeros = mtsarray::Array::zeros(device(), dtype(), shape);
            EXPECT_EQ(read_bytes(zeros), std::vector<uint8_t>(rows * 4 * size(), 0)) << rows << " rows";
        }
    }
    if (same_dtype(dtype(), float64())) {
        const double negative_zero = -0.0;
        mts_array_t raw = {};
        const uintptr_t shape[1] = {5};
        ASSERT_EQ(mtsarray_full(device(), dtype(), shape, 1, &negative_zero, &raw), MTS_SUCCESS) << last_error();
        mtsarray::Array array(raw);
        EXPECT_EQ(from_bytes<double>(read_bytes(array)), std::vector<double>(5, -0.0));
        EXPECT_TRUE(std::signbit(from_bytes<double>(read_bytes(array))[0]));
    }
}

TEST_P(Contract, FullRepeatsTheValue) {
    for (const auto& shape : std::vector<std::vector<uintptr_t>>{{7}, {3, 4}, {2, 3, 5}, {1, 1, 1, 1}}) {
        auto value = random_element();
        mts_array_t raw = {};
        ASSERT_EQ(mtsarray_full(device(), dtype(), shape.data(), shape.size(), value.data(), &raw), MTS_SUCCESS)
            << last_error();
        mtsarray::Array array(raw);
        const auto expected = repeat(value, product(shape));
        // the value's bytes were copied before mtsarray_full returned
        std::fill(value.begin(), value.end(), 0x5A);
        EXPECT_EQ(array.shape(), shape);
        EXPECT_EQ(read_bytes(array), expected);
    }
}

TEST_P(Contract, ScalarsHaveNoShape) {
    auto value = random_element();
    mts_array_t raw = {};
    ASSERT_EQ(mtsarray_full(device(), dtype(), nullptr, 0, value.data(), &raw), MTS_SUCCESS) << last_error();
    mtsarray::Array scalar(raw);

    const uintptr_t* shape = reinterpret_cast<const uintptr_t*>(0x1);
    uintptr_t count = 42;
    ASSERT_EQ(raw.shape(raw.ptr, &shape, &count), MTS_SUCCESS) << last_error();
    EXPECT_EQ(count, 0u);
    EXPECT_EQ(shape, nullptr);

    for (auto target : {DLDevice{kDLCPU, 0}, device()}) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, target, nullptr, dlpack_version()), MTS_SUCCESS) << last_error();
        EXPECT_EQ(tensor->dl_tensor.ndim, 0);
        EXPECT_TRUE(same_dtype(tensor->dl_tensor.dtype, dtype()));
        EXPECT_TRUE(same_device(tensor->dl_tensor.device, target));
        tensor->deleter(tensor);
    }
    EXPECT_EQ(read_bytes(scalar), value);

    auto zero = mtsarray::Array::zeros(device(), dtype(), {});
    EXPECT_TRUE(zero.shape().empty());
    EXPECT_EQ(read_bytes(zero), std::vector<uint8_t>(size(), 0));
}

TEST_P(Contract, EmptyArraysWork) {
    for (const auto& shape : std::vector<std::vector<uintptr_t>>{{0}, {0, 5}, {3, 0, 2}}) {
        auto array = mtsarray::Array::zeros(device(), dtype(), shape);
        EXPECT_EQ(array.shape(), shape);
        EXPECT_TRUE(read_bytes(array).empty());

        DLManagedTensorVersioned* tensor = nullptr;
        const auto& raw = array.get();
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, dlpack_version()), MTS_SUCCESS);
        ASSERT_EQ(tensor->dl_tensor.ndim, static_cast<int32_t>(shape.size()));
        for (size_t axis = 0; axis < shape.size(); axis++) {
            EXPECT_EQ(tensor->dl_tensor.shape[axis], static_cast<int64_t>(shape[axis]));
        }
        tensor->deleter(tensor);

        auto copy = array.copy(device());
        EXPECT_EQ(copy.shape(), shape);
        auto on_cpu = array.copy(DLDevice{kDLCPU, 0});
        EXPECT_EQ(on_cpu.shape(), shape);
    }

    auto array = mtsarray::Array::zeros(device(), dtype(), {3, 0, 2});
    auto& raw = const_cast<mts_array_t&>(array.get());
    ASSERT_EQ(raw.swap_axes(raw.ptr, 0, 2), MTS_SUCCESS) << last_error();
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{2, 0, 3}));
    const uintptr_t flat[] = {0};
    ASSERT_EQ(raw.reshape(raw.ptr, flat, 1), MTS_SUCCESS) << last_error();
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{0}));
    const uintptr_t bigger[] = {5, 0, 7};
    ASSERT_EQ(raw.reshape(raw.ptr, bigger, 3), MTS_SUCCESS) << last_error();
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{5, 0, 7}));
}

TEST_P(Contract, ReshapeKeepsTheData) {
    std::vector<uint8_t> bytes;
    auto array = random_array({3, 4}, &bytes);
    auto& raw = const_cast<mts_array_t&>(array.get());
    for (const auto& shape : std::vector<std::vector<uintptr_t>>{{2, 6}, {12}, {1, 12, 1}, {2, 2, 3}, {3, 4}}) {
        ASSERT_EQ(raw.reshape(raw.ptr, shape.data(), shape.size()), MTS_SUCCESS) << last_error();
        EXPECT_EQ(array.shape(), shape);
        EXPECT_EQ(read_bytes(array), bytes);
    }

    const uintptr_t wrong[] = {5};
    ASSERT_EQ(raw.reshape(raw.ptr, wrong, 1), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("can not reshape to [5] (5 elements), the array has 12 elements"), std::string::npos)
        << last_error();
    ASSERT_EQ(raw.reshape(raw.ptr, nullptr, 0), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("can not reshape to [] (1 elements)"), std::string::npos) << last_error();
    ASSERT_EQ(raw.reshape(raw.ptr, nullptr, 2), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("shape is NULL with shape_count = 2"), std::string::npos) << last_error();
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{3, 4}));
    EXPECT_EQ(read_bytes(array), bytes);

    // one element reshapes to a 0-d scalar and back
    auto value = random_element();
    auto single = array_from_bytes(device(), dtype(), {1, 1}, value);
    auto& single_raw = const_cast<mts_array_t&>(single.get());
    ASSERT_EQ(single_raw.reshape(single_raw.ptr, nullptr, 0), MTS_SUCCESS) << last_error();
    EXPECT_TRUE(single.shape().empty());
    EXPECT_EQ(read_bytes(single), value);
}

TEST_P(Contract, SwapAxesMatchesReference) {
    const std::vector<std::vector<uintptr_t>> shapes = {
        {5},          {3, 4},          {1, 6},          {6, 1},          {2, 1, 3},    {4, 3, 5},
        {2, 3, 1, 4}, {1, 3, 1, 2},    {2, 1, 3, 2, 2}, {3, 2, 2, 3, 2}, {1, 1, 1, 1, 1},
    };
    for (const auto& shape : shapes) {
        for (size_t axis_1 = 0; axis_1 < shape.size(); axis_1++) {
            for (size_t axis_2 = 0; axis_2 < shape.size(); axis_2++) {
                SCOPED_TRACE(::testing::Message() << "shape rank " << shape.size() << " axes " << axis_1 << ", "
                                                  << axis_2);
                std::vector<uint8_t> bytes;
                auto array = random_array(shape, &bytes);
                std::vector<uintptr_t> expected_shape;
                auto expected = swap_axes_reference(bytes, shape, size(), axis_1, axis_2, &expected_shape);

                auto& raw = const_cast<mts_array_t&>(array.get());
                ASSERT_EQ(raw.swap_axes(raw.ptr, axis_1, axis_2), MTS_SUCCESS) << last_error();
                ASSERT_EQ(array.shape(), expected_shape);
                ASSERT_EQ(read_bytes(array), expected);
                // swapping back restores the original
                ASSERT_EQ(raw.swap_axes(raw.ptr, axis_2, axis_1), MTS_SUCCESS) << last_error();
                ASSERT_EQ(array.shape(), shape);
                ASSERT_EQ(read_bytes(array), bytes);
            }
        }
    }
}

TEST_P(Contract, SwapAxesOfLargeArraysMatchesReference) {
    // large enough to go through every tile of a blocked transpose, with
    // sizes that are not multiples of any tile
    for (const auto& shape : std::vector<std::vector<uintptr_t>>{{300, 500}, {33, 65, 7}}) {
        std::vector<uint8_t> bytes;
        auto array = random_array(shape, &bytes);
        std::vector<uintptr_t> expected_shape;
        auto expected = swap_axes_reference(bytes, shape, size(), 0, shape.size() - 1, &expected_shape);
        auto& raw = const_cast<mts_array_t&>(array.get());
        ASSERT_EQ(raw.swap_axes(raw.ptr, 0, shape.size() - 1), MTS_SUCCESS) << last_error();
        EXPECT_EQ(array.shape(), expected_shape);
        EXPECT_EQ(read_bytes(array), expected);
    }
}

TEST_P(Contract, SwapAxesRejectsAxesOutOfRange) {
    std::vector<uint8_t> bytes;
    auto array = random_array({3, 4}, &bytes);
    auto& raw = const_cast<mts_array_t&>(array.get());
    ASSERT_EQ(raw.swap_axes(raw.ptr, 0, 2), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("can not swap axes 0 and 2 of an array with 2 axes"), std::string::npos)
        << last_error();
    ASSERT_EQ(raw.swap_axes(raw.ptr, 7, 1), MTS_CALLBACK_ERROR);
    EXPECT_EQ(array.shape(), (std::vector<uintptr_t>{3, 4}));
    EXPECT_EQ(read_bytes(array), bytes);

    auto scalar = mtsarray::Array::zeros(device(), dtype(), {});
    auto& scalar_raw = const_cast<mts_array_t&>(scalar.get());
    ASSERT_EQ(scalar_raw.swap_axes(scalar_raw.ptr, 0, 0), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("of an array with 0 axes"), std::string::npos) << last_error();
}

TEST_P(Contract, CreateFillsWithAnMtsarrayScalar) {
    std::vector<uint8_t> bytes;
    auto prototype = random_array({2, 3}, &bytes);
    const auto& raw = prototype.get();
    for (auto fill_device : {DLDevice{kDLCPU, 0}, device()}) {
        auto value = random_element();
        auto fill = array_from_bytes(fill_device, dtype(), {}, value);
        auto fill_raw = std::move(fill).release();

        const uintptr_t shape[] = {4, 5};
        mts_array_t created = {};
        ASSERT_EQ(raw.create(raw.ptr, shape, 2, fill_raw, &created), MTS_SUCCESS) << last_error();
        mtsarray::Array result(created);
        EXPECT_EQ(result.shape(), (std::vector<uintptr_t>{4, 5}));
        EXPECT_TRUE(same_dtype(result.dtype(), dtype()));
        EXPECT_TRUE(same_device(result.device(), device()));
        EXPECT_EQ(result.stream(), prototype.stream());
        EXPECT_EQ(read_bytes(result), repeat(value, 20));

        // create took the fill value and destroyed it
        bool alive = true;
        ASSERT_EQ(mtsarray_is_mtsarray(&fill_raw, &alive), MTS_SUCCESS);
        EXPECT_FALSE(alive);
    }
    // the prototype is untouched
    EXPECT_EQ(read_bytes(prototype), bytes);
}

TEST_P(Contract, CreateFillsWithAForeignScalarAndDestroysItOnce) {
    auto prototype = mtsarray::Array::zeros(device(), dtype(), {2, 3});
    const auto& raw = prototype.get();
    auto value = random_element();
    int destroyed = 0;
    auto fill = ForeignArray::make(dtype(), {}, value, &destroyed);

    mts_array_t created = {};
    ASSERT_EQ(raw.create(raw.ptr, nullptr, 0, fill, &created), MTS_SUCCESS) << last_error();
    EXPECT_EQ(destroyed, 1);
    mtsarray::Array result(created);
    EXPECT_TRUE(result.shape().empty());
    EXPECT_TRUE(same_device(result.device(), device()));
    EXPECT_EQ(read_bytes(result), value);

    destroyed = 0;
    fill = ForeignArray::make(dtype(), {}, value, &destroyed);
    const uintptr_t empty_shape[] = {0, 4};
    ASSERT_EQ(raw.create(raw.ptr, empty_shape, 2, fill, &created), MTS_SUCCESS) << last_error();
    EXPECT_EQ(destroyed, 1);
    mtsarray::Array empty(created);
    EXPECT_EQ(empty.shape(), (std::vector<uintptr_t>{0, 4}));
}

TEST_P(Contract, CreateDestroysTheFillValueOnceOnErrors) {
    auto prototype = mtsarray::Array::zeros(device(), dtype(), {2, 3});
    const auto& raw = prototype.get();
    const auto value = random_element();
    const uintptr_t shape[] = {4};
    const auto other_dtype = dtype().code == kDLFloat && dtype().bits == 64 ? float32() : float64();

    struct Case {
        const char* what;
        mts_array_t (*make)(DLDataType, DLDataType, const std::vector<uint8_t>&, int*);
        const uintptr_t* shape;
        uintptr_t shape_count;
        const char* message;
    };
    const Case cases[] = {
        {"wrong dtype",
         [](DLDataType, DLDataType other, const std::vector<uint8_t>&, int* counter) {
             return ForeignArray::make(other, {}, std::vector<uint8_t>(other.bits / 8, 0), counter);
         },
         shape, 1, "fill_value has dtype"},
        {"two elements",
         [](DLDataType dtype, DLDataType, const std::vector<uint8_t>& value, int* counter) {
             return ForeignArray::make(dtype, {2}, repeat(value, 2), counter);
         },
         shape, 1, "fill_value must hold a single scalar, its DLPack shape is [2]"},
        {"no element",
         [](DLDataType dtype, DLDataType, const std::vector<uint8_t>&, int* counter) {
             return ForeignArray::make(dtype, {0}, {}, counter);
         },
         shape, 1, "fill_value must hold a single scalar, its DLPack shape is [0]"},
        {"as_dlpack fails",
         [](DLDataType dtype, DLDataType, const std::vector<uint8_t>& value, int* counter) {
             return ForeignArray::make(dtype, {}, value, counter, /*fail_as_dlpack=*/true);
         },
         shape, 1, "ForeignArray refuses to export"},
        {"NULL shape",
         [](DLDataType dtype, DLDataType, const std::vector<uint8_t>& value, int* counter) {
             return ForeignArray::make(dtype, {}, value, counter);
         },
         nullptr, 3, "shape is NULL with shape_count = 3"},
    };
    for (const auto& test : cases) {
        SCOPED_TRACE(test.what);
        int destroyed = 0;
        auto fill = test.make(dtype(), other_dtype, value, &destroyed);
        mts_array_t created;
        std::memset(&created, 0xAB, sizeof(created));
        mts_array_t untouched = created;
        ASSERT_EQ(raw.create(raw.ptr, test.shape, test.shape_count, fill, &created), MTS_CALLBACK_ERROR);
        EXPECT_EQ(destroyed, 1);
        EXPECT_NE(last_error().find(test.message), std::string::npos) << last_error();
        EXPECT_NE(last_error().find("create"), std::string::npos) << last_error();
        EXPECT_EQ(last_error_origin(), "mtsarray");
        EXPECT_EQ(std::memcmp(&created, &untouched, sizeof(created)), 0) << "new_array was written on error";
    }

    // `this` is not an mtsarray array: the fill value is still destroyed
    int destroyed = 0;
    auto fill = ForeignArray::make(dtype(), {}, value, &destroyed);
    int not_an_array = 0;
    mts_array_t created = {};
    ASSERT_EQ(raw.create(&not_an_array, shape, 1, fill, &created), MTS_CALLBACK_ERROR);
    EXPECT_EQ(destroyed, 1);
    EXPECT_NE(last_error().find("was not made by mtsarray"), std::string::npos) << last_error();
}

TEST_P(Contract, CopyIsDeep) {
    std::vector<uint8_t> bytes;
    auto original = random_array({3, 4}, &bytes);
    auto copy = original.copy(device());
    EXPECT_TRUE(same_device(copy.device(), device()));
    EXPECT_TRUE(same_dtype(copy.dtype(), dtype()));
    EXPECT_EQ(copy.shape(), (std::vector<uintptr_t>{3, 4}));
    EXPECT_NE(copy.data(), original.data());
    EXPECT_EQ(read_bytes(copy), bytes);

    // modifying the copy leaves the original alone
    auto zeros = mtsarray::Array::zeros(device(), dtype(), {3, 4});
    overwrite(copy, zeros);
    EXPECT_EQ(read_bytes(copy), std::vector<uint8_t>(bytes.size(), 0));
    EXPECT_EQ(read_bytes(original), bytes);

    // and the other way around
    auto second = original.copy(device());
    overwrite(original, zeros);
    EXPECT_EQ(read_bytes(second), bytes);

    auto on_cpu = second.copy(DLDevice{kDLCPU, 0});
    EXPECT_EQ(on_cpu.device().device_type, kDLCPU);
    EXPECT_EQ(on_cpu.shape(), (std::vector<uintptr_t>{3, 4}));
    EXPECT_EQ(read_bytes(on_cpu), bytes);
    // a CPU copy is directly readable
    EXPECT_EQ(std::memcmp(on_cpu.data(), bytes.data(), bytes.size()), 0);

    // and back onto the device
    auto back = on_cpu.copy(device());
    EXPECT_TRUE(same_device(back.device(), device()));
    EXPECT_EQ(read_bytes(back), bytes);
}

TEST_P(Contract, OriginIsMtsarrayForEveryArray) {
    auto array = mtsarray::Array::zeros(device(), dtype(), {2});
    auto other = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {3, 3});
    mts_data_origin_t origin = 0;
    mts_data_origin_t other_origin = 1;
    ASSERT_EQ(array.get().origin(array.get().ptr, &origin), MTS_SUCCESS) << last_error();
    ASSERT_EQ(other.get().origin(other.get().ptr, &other_origin), MTS_SUCCESS) << last_error();
    EXPECT_EQ(origin, other_origin);

    char name[64] = {};
    ASSERT_EQ(mts_get_data_origin(origin, name, sizeof(name)), MTS_SUCCESS);
    EXPECT_STREQ(name, "mtsarray");

    // a different library's arrays have a different origin
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{2}));
    EXPECT_NE(simple.origin(), origin);
}

TEST_P(Contract, DestroyUnregistersTheArray) {
    auto raw = std::move(mtsarray::Array::zeros(device(), dtype(), {4, 2})).release();
    bool ours = false;
    ASSERT_EQ(mtsarray_is_mtsarray(&raw, &ours), MTS_SUCCESS);
    EXPECT_TRUE(ours);
    raw.destroy(raw.ptr);
    ASSERT_EQ(mtsarray_is_mtsarray(&raw, &ours), MTS_SUCCESS);
    EXPECT_FALSE(ours);
    // callbacks on a destroyed array fail cleanly instead of reading freed memory
    DLDataType dtype = {};
    EXPECT_EQ(raw.dtype(raw.ptr, &dtype), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("was not made by mtsarray (or was already destroyed)"), std::string::npos)
        << last_error();
}

// ---- foreign fill values from metatensor's own SimpleDataArray --------------

// Counts destroy calls of SimpleDataArray-backed mts_array_t by routing them
// through a shim (the other callbacks keep working on the same ptr).
int simple_destroyed = 0;
void (*simple_destroy)(void*) = nullptr;

template <typename T>
mts_array_t counted_simple_scalar(T value, std::vector<uintptr_t> shape = {}) {
    auto array = metatensor::DataArrayBase::to_mts_array(
                     std::make_unique<metatensor::SimpleDataArray<T>>(std::move(shape), value))
                     .release()
        ;
    simple_destroy = array.destroy;
    array.destroy = [](void* pointer) {
        simple_destroyed += 1;
        simple_destroy(pointer);
    };
    return array;
}

class CreateWithSimpleDataArray : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override {
        MTSARRAY_SKIP_UNLESS_AVAILABLE(GetParam());
        simple_destroyed = 0;
    }

    template <typename T>
    void check(T value) {
        auto prototype = mtsarray::Array::zeros(GetParam(), mtsarray::dtype_of<T>(), {2, 2});
        const auto& raw = prototype.get();
        const uintptr_t shape[] = {3, 2};
        mts_array_t created = {};
        const int before = simple_destroyed;
        ASSERT_EQ(raw.create(raw.ptr, shape, 2, counted_simple_scalar<T>(value), &created), MTS_SUCCESS)
            << last_error();
        EXPECT_EQ(simple_destroyed, before + 1);
        mtsarray::Array result(created);
        EXPECT_EQ(from_bytes<T>(read_bytes(result)), std::vector<T>(6, value));
    }
};

INSTANTIATE_TEST_SUITE_P(AllBackends, CreateWithSimpleDataArray, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

TEST_P(CreateWithSimpleDataArray, ReadsTheScalar) {
    check<double>(-2.5);
    check<float>(3.25f);
    check<int8_t>(-7);
    check<int16_t>(-300);
    check<int32_t>(123456);
    check<int64_t>(-(int64_t(1) << 40));
    check<uint8_t>(200);
    check<uint16_t>(60000);
    check<uint32_t>(4000000000u);
    check<uint64_t>(uint64_t(1) << 63);
}

TEST_P(CreateWithSimpleDataArray, ErrorsDestroyTheFillValueOnce) {
    auto prototype = mtsarray::Array::zeros(GetParam(), float64(), {2, 2});
    const auto& raw = prototype.get();
    const uintptr_t shape[] = {3};
    mts_array_t created = {};

    ASSERT_EQ(raw.create(raw.ptr, shape, 1, counted_simple_scalar<float>(1.0f), &created), MTS_CALLBACK_ERROR);
    EXPECT_EQ(simple_destroyed, 1);
    EXPECT_NE(last_error().find("fill_value has dtype float32, expected float64"), std::string::npos) << last_error();

    ASSERT_EQ(raw.create(raw.ptr, shape, 1, counted_simple_scalar<double>(1.0, {3}), &created), MTS_CALLBACK_ERROR);
    EXPECT_EQ(simple_destroyed, 2);
    EXPECT_NE(last_error().find("fill_value must hold a single scalar, its DLPack shape is [3]"), std::string::npos)
        << last_error();
    EXPECT_EQ(created.ptr, nullptr);
}

}  // namespace
