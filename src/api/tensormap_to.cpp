#include "api/tensormap_to.hpp"

#include <string>
#include <vector>

#include "core/array_registry.hpp"
#include "core/backend_registry.hpp"
#include "api/c_boundary.hpp"
#include "api/callbacks.hpp"
#include "api/foreign_array.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

namespace {

void check_status(mts_status_t status, const char* what) {
    if (status != MTS_SUCCESS) {
        throw Error(std::string(what) + " failed: " + last_error_message());
    }
}

template <typename Pointer>
Pointer* check_pointer(Pointer* pointer, const char* what) {
    if (pointer == nullptr) {
        throw Error(std::string(what) + " failed: " + last_error_message());
    }
    return pointer;
}

// Owners for the libmetatensor objects we create along the way.
struct LabelsOwner {
    const mts_labels_t* labels = nullptr;
    ~LabelsOwner() { mts_labels_free(labels); }
};

struct BlockOwner {
    mts_block_t* block = nullptr;
    ~BlockOwner() { mts_block_free(block); }
    mts_block_t* release() {
        auto* result = block;
        block = nullptr;
        return result;
    }
};

// An mts_array_t handed to a libmetatensor function that takes ownership.
mts_array_t into_mts_array(std::unique_ptr<Array> array) {
    return to_mts_array(std::move(array));
}

std::unique_ptr<Array> array_to(const mts_array_t& source, const Stream& stream) {
    const DLDevice device = stream.device();
    if (is_mtsarray(source)) {
        return copy_to_device(*find_array(source.ptr), device, &stream);
    }
    // another library's array: borrowed through DLPack on its own device,
    // given back once the copy that reads it has run
    auto borrowed = borrow_foreign_array(source, "an array of the TensorMap");
    return copy_to_device(*borrowed, device, &stream);
}

const mts_labels_t* labels_to(const mts_labels_t* labels, const Stream& stream) {
    const char* const* names = nullptr;
    uintptr_t names_count = 0;
    check_status(mts_labels_dimensions(labels, &names, &names_count), "mts_labels_dimensions");
    const int32_t* values = nullptr;
    uintptr_t count = 0;
    uintptr_t size = 0;
    check_status(mts_labels_values_cpu(labels, &values, &count, &size), "mts_labels_values_cpu");

    // libmetatensor keeps the values on the CPU: copy them from there
    // (no round trip through another array) and keep the host mirror
    const DLDataType int32 = {kDLInt, 32, 1};
    auto view = std::make_unique<Array>(
        Buffer::external(const_cast<int32_t*>(values), count * size * sizeof(int32_t), cpu_device(), [] {}),
        int32, Shape{count, size}, Stream::default_for(cpu_device()));
    auto moved = copy_to_device(*view, stream.device(), &stream);
    // the entries of existing Labels are unique already
    return check_pointer(mts_labels_assume_unique(names, names_count, into_mts_array(std::move(moved))),
                         "mts_labels_assume_unique");
}

mts_block_t* block_to(mts_block_t* block, const Stream& stream) {
    mts_array_t values = {};
    check_status(mts_block_data(block, &values), "mts_block_data");
    auto moved_values = array_to(values, stream);
    const auto axes = moved_values->shape().size();
    MTSARRAY_EXPECTS(axes >= 2, "a block's values must have at least two axes");

    std::vector<LabelsOwner> labels(axes);
    for (size_t axis = 0; axis < axes; axis++) {
        LabelsOwner original;
        original.labels = check_pointer(mts_block_labels(block, axis), "mts_block_labels");
        labels[axis].labels = labels_to(original.labels, stream);
    }
    std::vector<const mts_labels_t*> components;
    for (size_t axis = 1; axis + 1 < axes; axis++) {
        components.push_back(labels[axis].labels);
    }

    BlockOwner result;
    result.block = check_pointer(mts_block(into_mts_array(std::move(moved_values)), labels.front().labels,
                                           components.data(), components.size(), labels.back().labels),
                                 "mts_block");

    const char* const* parameters = nullptr;
    uintptr_t parameters_count = 0;
    check_status(mts_block_gradients_list(block, &parameters, &parameters_count), "mts_block_gradients_list");
    for (uintptr_t i = 0; i < parameters_count; i++) {
        mts_block_t* gradient = nullptr;
        check_status(mts_block_gradient(block, parameters[i], &gradient), "mts_block_gradient");
        // like metatensor's own C++ API: the gradient is the parent's from
        // the call on, whether it succeeds or not
        check_status(mts_block_add_gradient(result.block, parameters[i], block_to(gradient, stream)),
                     "mts_block_add_gradient");
    }
    return result.release();
}

}  // namespace

mts_tensormap_t* tensormap_to(const mts_tensormap_t* tensor, const Stream& stream) {
    MTSARRAY_EXPECTS(tensor != nullptr, "tensor is NULL");
    check_device_usable(stream.device());
    // libmetatensor's getters take non-const pointers but only read
    auto* source = const_cast<mts_tensormap_t*>(tensor);

    LabelsOwner keys;
    keys.labels = check_pointer(mts_tensormap_keys(tensor), "mts_tensormap_keys");
    const int32_t* key_values = nullptr;
    uintptr_t blocks_count = 0;
    uintptr_t key_size = 0;
    check_status(mts_labels_values_cpu(keys.labels, &key_values, &blocks_count, &key_size), "mts_labels_values_cpu");

    std::vector<BlockOwner> blocks(blocks_count);
    for (uintptr_t i = 0; i < blocks_count; i++) {
        mts_block_t* block = nullptr;
        check_status(mts_tensormap_block_by_id(source, &block, i), "mts_tensormap_block_by_id");
        blocks[i].block = block_to(block, stream);
    }

    LabelsOwner moved_keys;
    moved_keys.labels = labels_to(keys.labels, stream);
    // the tensor map owns the blocks from the call on, success or not
    std::vector<mts_block_t*> block_pointers(blocks_count);
    for (uintptr_t i = 0; i < blocks_count; i++) {
        block_pointers[i] = blocks[i].release();
    }
    auto* result = check_pointer(mts_tensormap(moved_keys.labels, block_pointers.data(), blocks_count),
                                 "mts_tensormap");

    const char* const* info_keys = nullptr;
    uintptr_t info_count = 0;
    try {
        check_status(mts_tensormap_info_keys(tensor, &info_keys, &info_count), "mts_tensormap_info_keys");
        for (uintptr_t i = 0; i < info_count; i++) {
            const char* value = nullptr;
            check_status(mts_tensormap_get_info(tensor, info_keys[i], &value), "mts_tensormap_get_info");
            check_status(mts_tensormap_set_info(result, info_keys[i], value), "mts_tensormap_set_info");
        }
    } catch (...) {
        mts_tensormap_free(result);
        throw;
    }
    return result;
}

}  // namespace mtsarray::detail
