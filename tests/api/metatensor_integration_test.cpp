// libmetatensor driving mtsarray arrays through its C API: Labels with
// mtsarray int32 values, TensorBlocks with values and gradients, a TensorMap
// of several blocks, keys_to_samples, keys_to_properties (with a fill value),
// block copies, and a save/load round trip creating mtsarray arrays. Every
// result is compared, value by value and label by label, with the same
// operations done on metatensor::SimpleDataArray-backed blocks.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

// ---- the two kinds of arrays ---------------------------------------------------

enum class Kind { mtsarray, simple };

void PrintTo(Kind kind, std::ostream* stream) { *stream << (kind == Kind::mtsarray ? "mtsarray" : "SimpleDataArray"); }

mts_array_t make_array(Kind kind, DLDataType dtype, const std::vector<uintptr_t>& shape,
                       const std::vector<uint8_t>& bytes) {
    if (kind == Kind::mtsarray) {
        return array_from_bytes(DLDevice{kDLCPU, 0}, dtype, shape, bytes).release();
    }
    if (same_dtype(dtype, float64())) {
        return metatensor::DataArrayBase::to_mts_array(
                   std::make_unique<metatensor::SimpleDataArray<double>>(shape, from_bytes<double>(bytes)))
            .release();
    }
    EXPECT_TRUE(same_dtype(dtype, int32()));
    return metatensor::DataArrayBase::to_mts_array(
               std::make_unique<metatensor::SimpleDataArray<int32_t>>(shape, from_bytes<int32_t>(bytes)))
        .release();
}

mts_array_t make_scalar(Kind kind, double value) {
    return make_array(kind, float64(), {}, to_bytes(std::vector<double>{value}));
}

bool is_mtsarray(const mts_array_t& array) {
    bool ours = false;
    EXPECT_EQ(mtsarray_is_mtsarray(&array, &ours), MTS_SUCCESS);
    return ours;
}

std::string origin_name(const mts_array_t& array) {
    mts_data_origin_t origin = 0;
    EXPECT_EQ(array.origin(array.ptr, &origin), MTS_SUCCESS) << last_error();
    char name[128] = {};
    EXPECT_EQ(mts_get_data_origin(origin, name, sizeof(name)), MTS_SUCCESS);
    return name;
}

// ---- RAII for metatensor C objects --------------------------------------------

struct LabelsDeleter {
    void operator()(const mts_labels_t* labels) const { mts_labels_free(labels); }
};
using LabelsPtr = std::unique_ptr<const mts_labels_t, LabelsDeleter>;

struct TensorDeleter {
    void operator()(mts_tensormap_t* tensor) const { mts_tensormap_free(tensor); }
};
using TensorPtr = std::unique_ptr<mts_tensormap_t, TensorDeleter>;

struct BlockDeleter {
    void operator()(mts_block_t* block) const { mts_block_free(block); }
};
using BlockPtr = std::unique_ptr<mts_block_t, BlockDeleter>;

LabelsPtr make_labels(Kind kind, const std::vector<std::string>& names, const std::vector<int32_t>& values) {
    std::vector<const char*> c_names;
    for (const auto& name : names) {
        c_names.push_back(name.c_str());
    }
    const uintptr_t count = names.empty() ? 0 : values.size() / names.size();
    auto array = make_array(kind, int32(), {count, names.size()}, to_bytes(values));
    const mts_labels_t* labels = mts_labels(c_names.data(), c_names.size(), array);
    EXPECT_NE(labels, nullptr) << last_error();
    return LabelsPtr(labels);
}

// ---- the test data --------------------------------------------------------------

double value_at(size_t block, size_t index, double scale) {
    return static_cast<double>(block) * 1000.0 + static_cast<double>(index) * scale - 7.0;
}

/// A block of shape [samples, 3 (xyz), 4 (n)] with a "positions" gradient of
/// shape [gradient samples, 3 (xyz_grad), 3 (xyz), 4 (n)].
mts_block_t* make_block(Kind kind, size_t id, const std::vector<int32_t>& samples) {
    const size_t sample_count = samples.size() / 2;
    std::vector<double> values(sample_count * 3 * 4);
    for (size_t i = 0; i < values.size(); i++) {
        values[i] = value_at(id, i, 0.25);
    }
    auto samples_labels = make_labels(kind, {"system", "atom"}, samples);
    auto xyz = make_labels(kind, {"xyz"}, {0, 1, 2});
    auto properties = make_labels(kind, {"n"}, {0, 1, 2, 3});
    const mts_labels_t* components[] = {xyz.get()};
    mts_block_t* block = mts_block(make_array(kind, float64(), {sample_count, 3, 4}, to_bytes(values)),
                                   samples_labels.get(), components, 1, properties.get());
    EXPECT_NE(block, nullptr) << last_error();

    // gradient samples: (sample, system, atom), two for sample 0
    std::vector<int32_t> gradient_samples;
    for (size_t s = 0; s < sample_count; s++) {
        gradient_samples.insert(gradient_samples.end(), {static_cast<int32_t>(s), 0, static_cast<int32_t>(s % 2)});
    }
    gradient_samples.insert(gradient_samples.end(), {0, 1, 1});
    const size_t gradient_count = gradient_samples.size() / 3;
    std::vector<double> gradient_values(gradient_count * 3 * 3 * 4);
    for (size_t i = 0; i < gradient_values.size(); i++) {
        gradient_values[i] = value_at(id, i, -0.5);
    }
    auto gradient_samples_labels = make_labels(kind, {"sample", "system", "atom"}, gradient_samples);
    auto xyz_grad = make_labels(kind, {"xyz_grad"}, {0, 1, 2});
    const mts_labels_t* gradient_components[] = {xyz_grad.get(), xyz.get()};
    mts_block_t* gradient =
        mts_block(make_array(kind, float64(), {gradient_count, 3, 3, 4}, to_bytes(gradient_values)),
                  gradient_samples_labels.get(), gradient_components, 2, properties.get());
    EXPECT_NE(gradient, nullptr) << last_error();
    EXPECT_EQ(mts_block_add_gradient(block, "positions", gradient), MTS_SUCCESS) << last_error();
    return block;
}

/// Three blocks, keys (key_a, key_b) = (0, 0), (0, 1), (1, 0), with
/// different samples so that merging along properties leaves holes.
TensorPtr make_tensor(Kind kind) {
    auto keys = make_labels(kind, {"key_a", "key_b"}, {0, 0, 0, 1, 1, 0});
    mts_block_t* blocks[] = {
        make_block(kind, 0, {0, 0, 0, 1, 1, 0}),
        make_block(kind, 1, {0, 1, 2, 0}),
        make_block(kind, 2, {1, 1, 0, 0, 3, 2, 1, 0}),
    };
    mts_tensormap_t* tensor = mts_tensormap(keys.get(), blocks, 3);
    EXPECT_NE(tensor, nullptr) << last_error();
    return TensorPtr(tensor);
}

// ---- comparisons -----------------------------------------------------------------

struct LabelsContent {
    std::vector<std::string> names;
    std::vector<int32_t> values;
    bool operator==(const LabelsContent& other) const { return names == other.names && values == other.values; }
};

std::ostream& operator<<(std::ostream& stream, const LabelsContent& labels) {
    stream << "(";
    for (const auto& name : labels.names) {
        stream << name << " ";
    }
    stream << ":";
    for (auto value : labels.values) {
        stream << " " << value;
    }
    return stream << ")";
}

LabelsContent content_of(const mts_labels_t* labels) {
    LabelsContent content;
    const char* const* names = nullptr;
    uintptr_t names_count = 0;
    EXPECT_EQ(mts_labels_dimensions(labels, &names, &names_count), MTS_SUCCESS) << last_error();
    for (uintptr_t i = 0; i < names_count; i++) {
        content.names.emplace_back(names[i]);
    }
    const int32_t* values = nullptr;
    uintptr_t count = 0, size = 0;
    EXPECT_EQ(mts_labels_values_cpu(labels, &values, &count, &size), MTS_SUCCESS) << last_error();
    if (count * size != 0) {
        content.values.assign(values, values + count * size);
    }
    return content;
}

struct BlockCheck {
    bool expect_mtsarray;  // every data array of the block is an mtsarray array
};

void compare_blocks(mts_block_t* actual, mts_block_t* expected, const BlockCheck& check, const std::string& where) {
    SCOPED_TRACE(where);
    mts_array_t actual_data = {}, expected_data = {};
    ASSERT_EQ(mts_block_data(actual, &actual_data), MTS_SUCCESS) << last_error();
    ASSERT_EQ(mts_block_data(expected, &expected_data), MTS_SUCCESS) << last_error();
    if (check.expect_mtsarray) {
        EXPECT_EQ(origin_name(actual_data), "mtsarray");
        EXPECT_TRUE(is_mtsarray(actual_data)) << "the block's values are not an mtsarray array";
    }
    const auto shape = shape_of(actual_data);
    ASSERT_EQ(shape, shape_of(expected_data));
    EXPECT_EQ(from_bytes<double>(read_bytes(actual_data)), from_bytes<double>(read_bytes(expected_data)));

    for (uintptr_t axis = 0; axis < shape.size(); axis++) {
        LabelsPtr a(mts_block_labels(actual, axis));
        LabelsPtr e(mts_block_labels(expected, axis));
        ASSERT_NE(a, nullptr) << last_error();
        ASSERT_NE(e, nullptr) << last_error();
        EXPECT_EQ(content_of(a.get()), content_of(e.get())) << "axis " << axis;
    }

    const char* const* actual_parameters = nullptr;
    const char* const* expected_parameters = nullptr;
    uintptr_t actual_count = 0, expected_count = 0;
    ASSERT_EQ(mts_block_gradients_list(actual, &actual_parameters, &actual_count), MTS_SUCCESS);
    ASSERT_EQ(mts_block_gradients_list(expected, &expected_parameters, &expected_count), MTS_SUCCESS);
    ASSERT_EQ(actual_count, expected_count);
    for (uintptr_t i = 0; i < actual_count; i++) {
        ASSERT_STREQ(actual_parameters[i], expected_parameters[i]);
        mts_block_t* actual_gradient = nullptr;
        mts_block_t* expected_gradient = nullptr;
        ASSERT_EQ(mts_block_gradient(actual, actual_parameters[i], &actual_gradient), MTS_SUCCESS);
        ASSERT_EQ(mts_block_gradient(expected, expected_parameters[i], &expected_gradient), MTS_SUCCESS);
        compare_blocks(actual_gradient, expected_gradient, check, where + " gradient " + actual_parameters[i]);
    }
}

void compare_tensors(mts_tensormap_t* actual, mts_tensormap_t* expected, const BlockCheck& check) {
    LabelsPtr actual_keys(mts_tensormap_keys(actual));
    LabelsPtr expected_keys(mts_tensormap_keys(expected));
    ASSERT_NE(actual_keys, nullptr);
    ASSERT_NE(expected_keys, nullptr);
    const auto keys = content_of(actual_keys.get());
    ASSERT_EQ(keys, content_of(expected_keys.get()));
    const size_t blocks = keys.names.empty() ? 0 : keys.values.size() / keys.names.size();
    ASSERT_GT(blocks, 0u);
    for (uintptr_t i = 0; i < blocks; i++) {
        mts_block_t* a = nullptr;
        mts_block_t* e = nullptr;
        ASSERT_EQ(mts_tensormap_block_by_id(actual, &a, i), MTS_SUCCESS) << last_error();
        ASSERT_EQ(mts_tensormap_block_by_id(expected, &e, i), MTS_SUCCESS) << last_error();
        compare_blocks(a, e, check, "block " + std::to_string(i));
    }
}

// ---- tests -----------------------------------------------------------------------

TEST(Metatensor, LabelsHoldMtsarrayValues) {
    auto labels = make_labels(Kind::mtsarray, {"a", "b"}, {0, 1, 2, 3, 4, 5});
    ASSERT_NE(labels, nullptr);
    EXPECT_EQ(content_of(labels.get()), (LabelsContent{{"a", "b"}, {0, 1, 2, 3, 4, 5}}));
    mts_array_t values = {};
    ASSERT_EQ(mts_labels_values(labels.get(), &values), MTS_SUCCESS) << last_error();
    EXPECT_EQ(origin_name(values), "mtsarray");
    EXPECT_EQ(shape_of(values), (std::vector<uintptr_t>{3, 2}));
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(values)), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));

    int64_t position = -2;
    const int32_t entry[] = {4, 5};
    ASSERT_EQ(mts_labels_position(labels.get(), entry, 2, &position), MTS_SUCCESS) << last_error();
    EXPECT_EQ(position, 2);

    // duplicated entries are found by metatensor, through our as_dlpack
    auto array = make_array(Kind::mtsarray, int32(), {2, 1}, to_bytes(std::vector<int32_t>{7, 7}));
    const char* name = "a";
    EXPECT_EQ(mts_labels(&name, 1, array), nullptr);
    EXPECT_NE(last_error().find("7"), std::string::npos) << last_error();
}

TEST(Metatensor, BlocksAndTensorMapsMatchSimpleDataArray) {
    auto actual = make_tensor(Kind::mtsarray);
    auto expected = make_tensor(Kind::simple);
    ASSERT_NE(actual, nullptr);
    ASSERT_NE(expected, nullptr);
    compare_tensors(actual.get(), expected.get(), {true});

    DLDevice device = {};
    ASSERT_EQ(mts_tensormap_device(actual.get(), &device), MTS_SUCCESS);
    EXPECT_EQ(device.device_type, kDLCPU);
    DLDataType dtype = {};
    ASSERT_EQ(mts_tensormap_dtype(actual.get(), &dtype), MTS_SUCCESS);
    EXPECT_TRUE(same_dtype(dtype, float64()));
}

TEST(Metatensor, BlockCopyIsDeep) {
    auto tensor = make_tensor(Kind::mtsarray);
    mts_block_t* block = nullptr;
    ASSERT_EQ(mts_tensormap_block_by_id(tensor.get(), &block, 2), MTS_SUCCESS);
    BlockPtr copy(mts_block_copy(block));
    ASSERT_NE(copy, nullptr) << last_error();
    compare_blocks(copy.get(), block, {true}, "copy");

    mts_array_t original_data = {}, copy_data = {};
    ASSERT_EQ(mts_block_data(block, &original_data), MTS_SUCCESS);
    ASSERT_EQ(mts_block_data(copy.get(), &copy_data), MTS_SUCCESS);
    void* original_pointer = nullptr;
    void* copy_pointer = nullptr;
    ASSERT_EQ(mtsarray_data(&original_data, &original_pointer), MTS_SUCCESS) << last_error();
    ASSERT_EQ(mtsarray_data(&copy_data, &copy_pointer), MTS_SUCCESS) << last_error();
    EXPECT_NE(original_pointer, copy_pointer);

    // writing into the copy leaves the original alone
    const auto before = read_bytes(original_data);
    static_cast<double*>(copy_pointer)[0] = 1e300;
    EXPECT_EQ(read_bytes(original_data), before);
}

class MergeKeys : public ::testing::TestWithParam<Kind> {};  // the kind of fill value

INSTANTIATE_TEST_SUITE_P(FillValues, MergeKeys, ::testing::Values(Kind::mtsarray, Kind::simple),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                             return std::string(info.param == Kind::mtsarray ? "mtsarray_fill" : "simple_fill");
                         });

TEST_P(MergeKeys, KeysToSamples) {
    auto actual = make_tensor(Kind::mtsarray);
    auto expected = make_tensor(Kind::simple);
    for (bool sort : {true, false}) {
        SCOPED_TRACE(sort ? "sorted" : "not sorted");
        auto keys_to_move = make_labels(Kind::mtsarray, {"key_b"}, {});
        TensorPtr moved(mts_tensormap_keys_to_samples(actual.get(), keys_to_move.get(), make_scalar(GetParam(), 0.0),
                                                      sort));
        ASSERT_NE(moved, nullptr) << last_error();
        TensorPtr reference(mts_tensormap_keys_to_samples(expected.get(), keys_to_move.get(),
                                                          make_scalar(Kind::simple, 0.0), sort));
        ASSERT_NE(reference, nullptr) << last_error();
        compare_tensors(moved.get(), reference.get(), {true});

        // two blocks are left: key_a = 0 (3 + 2 samples) and key_a = 1
        mts_block_t* merged = nullptr;
        ASSERT_EQ(mts_tensormap_block_by_id(moved.get(), &merged, 0), MTS_SUCCESS);
        mts_array_t data = {};
        ASSERT_EQ(mts_block_data(merged, &data), MTS_SUCCESS);
        EXPECT_EQ(shape_of(data), (std::vector<uintptr_t>{5, 3, 4}));
    }
}

TEST_P(MergeKeys, KeysToPropertiesFillsTheHoles) {
    auto actual = make_tensor(Kind::mtsarray);
    auto expected = make_tensor(Kind::simple);
    for (bool sort : {true, false}) {
        SCOPED_TRACE(sort ? "sorted" : "not sorted");
        auto keys_to_move = make_labels(Kind::mtsarray, {"key_b"}, {});
        TensorPtr moved(mts_tensormap_keys_to_properties(actual.get(), keys_to_move.get(),
                                                         make_scalar(GetParam(), -7.5), sort));
        ASSERT_NE(moved, nullptr) << last_error();
        TensorPtr reference(mts_tensormap_keys_to_properties(expected.get(), keys_to_move.get(),
                                                             make_scalar(Kind::simple, -7.5), sort));
        ASSERT_NE(reference, nullptr) << last_error();
        compare_tensors(moved.get(), reference.get(), {true});

        // block key_a = 0: union of 3 and 2 samples (4 distinct), 8 properties;
        // the holes hold the fill value
        mts_block_t* merged = nullptr;
        ASSERT_EQ(mts_tensormap_block_by_id(moved.get(), &merged, 0), MTS_SUCCESS);
        mts_array_t data = {};
        ASSERT_EQ(mts_block_data(merged, &data), MTS_SUCCESS);
        EXPECT_EQ(shape_of(data), (std::vector<uintptr_t>{4, 3, 8}));
        auto values = from_bytes<double>(read_bytes(data));
        // holes: (2, 0) in the first block, (0, 0) and (1, 0) in the second
        EXPECT_EQ(std::count(values.begin(), values.end(), -7.5), 3 * 3 * 4);
    }
}

mts_status_t create_mtsarray(const uintptr_t* shape, uintptr_t shape_count, DLDataType dtype, mts_array_t* array) {
    return mtsarray_zeros(DLDevice{kDLCPU, 0}, dtype, shape, shape_count, array);
}

mts_status_t create_simple(const uintptr_t* shape, uintptr_t shape_count, DLDataType dtype, mts_array_t* array) {
    if (!same_dtype(dtype, float64())) {
        mts_set_last_error("unexpected dtype", "mtsarray-tests", nullptr, nullptr);
        return MTS_CALLBACK_ERROR;
    }
    *array = metatensor::DataArrayBase::to_mts_array(std::make_unique<metatensor::SimpleDataArray<double>>(
                                                         std::vector<uintptr_t>(shape, shape + shape_count)))
                 .release();
    return MTS_SUCCESS;
}

uint8_t* grow(void*, uint8_t* pointer, uintptr_t size) { return static_cast<uint8_t*>(std::realloc(pointer, size)); }

TEST(Metatensor, SaveAndLoadMakeMtsarrayArrays) {
    auto tensor = make_tensor(Kind::mtsarray);
    auto reference = make_tensor(Kind::simple);

    uint8_t* buffer = nullptr;
    uintptr_t count = 0;
    ASSERT_EQ(mts_tensormap_save_buffer(&buffer, &count, nullptr, grow, tensor.get()), MTS_SUCCESS) << last_error();
    ASSERT_NE(buffer, nullptr);
    uint8_t* reference_buffer = nullptr;
    uintptr_t reference_count = 0;
    ASSERT_EQ(mts_tensormap_save_buffer(&reference_buffer, &reference_count, nullptr, grow, reference.get()),
              MTS_SUCCESS)
        << last_error();
    // the same bytes whatever arrays held the data
    EXPECT_EQ(std::vector<uint8_t>(buffer, buffer + count),
              std::vector<uint8_t>(reference_buffer, reference_buffer + reference_count));

    TensorPtr loaded(mts_tensormap_load_buffer(buffer, count, create_mtsarray));
    ASSERT_NE(loaded, nullptr) << last_error();
    TensorPtr loaded_reference(mts_tensormap_load_buffer(reference_buffer, reference_count, create_simple));
    ASSERT_NE(loaded_reference, nullptr) << last_error();
    std::free(buffer);
    std::free(reference_buffer);

    compare_tensors(loaded.get(), tensor.get(), {true});
    compare_tensors(loaded.get(), loaded_reference.get(), {true});
}

}  // namespace
