#include "api/tensormap_to.hpp"

#include <string>
#include <vector>

#include "core/handle_registry.hpp"
#include "core/backend_registry.hpp"
#include "api/callbacks.hpp"
#include "api/foreign_array.hpp"
#include "api/foreign_call.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

namespace {

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
    call_foreign("mts_labels_dimensions", [&] { return mts_labels_dimensions(labels, &names, &names_count); });
    const int32_t* values = nullptr;
    uintptr_t count = 0;
    uintptr_t size = 0;
    call_foreign("mts_labels_values_cpu", [&] { return mts_labels_values_cpu(labels, &values, &count, &size); });

    // libmetatensor keeps the values on the CPU: copy them from there
    // (no round trip through another array) and keep the host mirror
    const DLDataType int32 = {kDLInt, 32, 1};
    auto view = std::make_unique<Array>(
        Buffer::external(const_cast<int32_t*>(values), count * size * sizeof(int32_t), cpu_device(), [] {}),
        int32, Shape{count, size}, Stream::default_for(cpu_device()));
    auto moved = copy_to_device(*view, stream.device(), &stream);
    // the entries of existing Labels are unique already
    mts_array_t moved_values = into_mts_array(std::move(moved));
    return call_foreign_for_pointer("mts_labels_assume_unique",
                                    [&] { return mts_labels_assume_unique(names, names_count, moved_values); });
}

mts_block_t* block_to(mts_block_t* block, const Stream& stream) {
    mts_array_t values = {};
    call_foreign("mts_block_data", [&] { return mts_block_data(block, &values); });
    auto moved_values = array_to(values, stream);
    const auto axes = moved_values->shape().size();
    MTSARRAY_EXPECTS(axes >= 2, "a block's values must have at least two axes");

    std::vector<LabelsOwner> labels(axes);
    for (size_t axis = 0; axis < axes; axis++) {
        LabelsOwner original;
        original.labels =
            call_foreign_for_pointer("mts_block_labels", [&] { return mts_block_labels(block, axis); });
        labels[axis].labels = labels_to(original.labels, stream);
    }
    std::vector<const mts_labels_t*> components;
    for (size_t axis = 1; axis + 1 < axes; axis++) {
        components.push_back(labels[axis].labels);
    }

    BlockOwner result;
    const mts_array_t values_array = into_mts_array(std::move(moved_values));
    result.block = call_foreign_for_pointer("mts_block", [&] {
        return mts_block(values_array, labels.front().labels, components.data(), components.size(),
                         labels.back().labels);
    });

    const char* const* parameters = nullptr;
    uintptr_t parameters_count = 0;
    call_foreign("mts_block_gradients_list",
                 [&] { return mts_block_gradients_list(block, &parameters, &parameters_count); });
    for (uintptr_t i = 0; i < parameters_count; i++) {
        mts_block_t* gradient = nullptr;
        call_foreign("mts_block_gradient", [&] { return mts_block_gradient(block, parameters[i], &gradient); });
        // like metatensor's own C++ API: the gradient is the parent's from
        // the call on, whether it succeeds or not
        mts_block_t* moved_gradient = block_to(gradient, stream);
        call_foreign("mts_block_add_gradient",
                     [&] { return mts_block_add_gradient(result.block, parameters[i], moved_gradient); });
    }
    return result.release();
}

}  // namespace

mts_tensormap_t* tensormap_to(const mts_tensormap_t* tensor, const Stream& stream) {
    MTSARRAY_EXPECTS(tensor != nullptr, "tensor is NULL");
    check_device_usable(stream.device());
    memory_backend(stream.device().device_type).check_stream(stream);  // before anything is copied
    // libmetatensor's getters take non-const pointers but only read
    auto* source = const_cast<mts_tensormap_t*>(tensor);

    LabelsOwner keys;
    keys.labels = call_foreign_for_pointer("mts_tensormap_keys", [&] { return mts_tensormap_keys(tensor); });
    const int32_t* key_values = nullptr;
    uintptr_t blocks_count = 0;
    uintptr_t key_size = 0;
    call_foreign("mts_labels_values_cpu",
                 [&] { return mts_labels_values_cpu(keys.labels, &key_values, &blocks_count, &key_size); });

    std::vector<BlockOwner> blocks(blocks_count);
    for (uintptr_t i = 0; i < blocks_count; i++) {
        mts_block_t* block = nullptr;
        call_foreign("mts_tensormap_block_by_id", [&] { return mts_tensormap_block_by_id(source, &block, i); });
        blocks[i].block = block_to(block, stream);
    }

    LabelsOwner moved_keys;
    moved_keys.labels = labels_to(keys.labels, stream);
    // the tensor map owns the blocks from the call on, success or not
    std::vector<mts_block_t*> block_pointers(blocks_count);
    for (uintptr_t i = 0; i < blocks_count; i++) {
        block_pointers[i] = blocks[i].release();
    }
    auto* result = call_foreign_for_pointer(
        "mts_tensormap", [&] { return mts_tensormap(moved_keys.labels, block_pointers.data(), blocks_count); });

    const char* const* info_keys = nullptr;
    uintptr_t info_count = 0;
    try {
        call_foreign("mts_tensormap_info_keys",
                     [&] { return mts_tensormap_info_keys(tensor, &info_keys, &info_count); });
        for (uintptr_t i = 0; i < info_count; i++) {
            const char* value = nullptr;
            call_foreign("mts_tensormap_get_info",
                         [&] { return mts_tensormap_get_info(tensor, info_keys[i], &value); });
            call_foreign("mts_tensormap_set_info",
                         [&] { return mts_tensormap_set_info(result, info_keys[i], value); });
        }
    } catch (...) {
        mts_tensormap_free(result);
        throw;
    }
    return result;
}

}  // namespace mtsarray::detail
