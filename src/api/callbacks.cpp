// Every slot of the mts_array_t vtable is a captureless lambda that runs its
// body through `guard`: exceptions become mts_set_last_error +
// MTS_CALLBACK_ERROR, with a message naming the callback and the array.

#include "api/callbacks.hpp"

#include <string>
#include <vector>

#include "core/handle_registry.hpp"
#include "api/c_boundary.hpp"
#include "api/create_like.hpp"
#include "api/foreign_call.hpp"
#include "base/error.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

namespace {

Array& self(const void* handle) {
    return Array::from_handle(handle, "this");
}

// "mtsarray: move_data (float64 array of shape [3, 4] on cpu)"
auto context(const char* callback, const void* handle) {
    return [callback, handle]() {
        std::string text = std::string("mtsarray: ") + callback;
        if (const Array* array = find_array(handle)) {
            text += " (" + array->describe() + ")";
        }
        return text;
    };
}

}  // namespace

// The vtable slots; their own namespace keeps them apart from the operations
// of the same name.
namespace vtable {

void destroy(void* handle) {
    // metatensor may call destroy on any thread; nothing here can throw. A
    // handle destroyed twice (or a foreign one) is found dead and ignored:
    // it can never free another array.
    delete unregister_array(handle);
}

mts_status_t origin(const void* handle, mts_data_origin_t* result) {
    return guard(context("origin", handle), [&] {
        check_not_null(result, "origin");
        *result = data_origin();
    });
}

mts_status_t device(const void* handle, DLDevice* result) {
    return guard(context("device", handle), [&] {
        check_not_null(result, "device");
        *result = self(handle).device();
    });
}

mts_status_t dtype(const void* handle, DLDataType* result) {
    return guard(context("dtype", handle), [&] {
        check_not_null(result, "dtype");
        *result = self(handle).dtype();
    });
}

mts_status_t as_dlpack(void* handle, DLManagedTensorVersioned** result, DLDevice device,
                       const int64_t* stream, DLPackVersion max_version) {
    return guard(context("as_dlpack", handle), [&] {
        check_not_null(result, "dl_managed_tensor");
        *result = detail::as_dlpack(self(handle), device, stream, max_version);
    });
}

mts_status_t from_dlpack(const void* handle, DLManagedTensorVersioned* tensor, mts_array_t* result) {
    return guard(context("from_dlpack", handle), [&] {
        // the tensor is ours even when we fail: import first, then check
        auto array = detail::from_dlpack(tensor);
        check_not_null(result, "new_array");
        *result = to_mts_array(std::move(array));
    });
}

mts_status_t shape(const void* handle, const uintptr_t** result, uintptr_t* count) {
    return guard(context("shape", handle), [&] {
        check_not_null(result, "shape");
        check_not_null(count, "shape_count");
        const auto& dimensions = self(handle).shape();
        *result = dimensions.empty() ? nullptr : dimensions.data();
        *count = dimensions.size();
    });
}

mts_status_t reshape(void* handle, const uintptr_t* shape, uintptr_t count) {
    return guard(context("reshape", handle), [&] { self(handle).reshape(shape_argument(shape, count)); });
}

mts_status_t swap_axes(void* handle, uintptr_t axis_1, uintptr_t axis_2) {
    return guard(context("swap_axes", handle), [&] { detail::swap_axes(self(handle), axis_1, axis_2); });
}

mts_status_t create(const void* handle, const uintptr_t* shape, uintptr_t count, mts_array_t fill_value,
                    mts_array_t* result) {
    bool fill_value_taken = false;
    auto status = guard(context("create", handle), [&] {
        const auto& prototype = self(handle);
        auto dimensions = shape_argument(shape, count);
        fill_value_taken = true;  // create_like destroys it, error or not
        auto array = create_like(prototype, std::move(dimensions), fill_value);
        check_not_null(result, "new_array");
        *result = to_mts_array(std::move(array));
    });
    if (!fill_value_taken && fill_value.destroy != nullptr) {
        fill_value.destroy(fill_value.ptr);
    }
    return status;
}

mts_status_t copy(const void* handle, DLDevice device, mts_array_t* result) {
    return guard(context("copy", handle), [&] {
        check_not_null(result, "new_array");
        *result = to_mts_array(copy_to_device(self(handle), device));
    });
}

mts_status_t move_data(void* output, const void* input, const mts_data_movement_t* movements, uintptr_t count) {
    return guard(context("move_data", output), [&] {
        auto& destination = Array::from_handle(output, "output");
        const auto& source = Array::from_handle(input, "input");
        detail::move_data(destination, source, movements, count);
    });
}

}  // namespace vtable

mts_data_origin_t data_origin() {
    // registered once, thread-safe (static initialisation)
    static const mts_data_origin_t registered = [] {
        mts_data_origin_t value = 0;
        call_foreign("registering the 'mtsarray' data origin",
                     [&] { return mts_register_data_origin("mtsarray", &value); });
        return value;
    }();
    return registered;
}

mts_array_t to_mts_array(std::unique_ptr<Array> array) noexcept {
    mts_array_t result = {};
    result.ptr = array.release()->handle();
    result.destroy = vtable::destroy;
    result.origin = vtable::origin;
    result.device = vtable::device;
    result.dtype = vtable::dtype;
    result.as_dlpack = vtable::as_dlpack;
    result.from_dlpack = vtable::from_dlpack;
    result.shape = vtable::shape;
    result.reshape = vtable::reshape;
    result.swap_axes = vtable::swap_axes;
    result.create = vtable::create;
    result.copy = vtable::copy;
    result.move_data = vtable::move_data;
    return result;
}

bool is_mtsarray(const mts_array_t& array) noexcept {
    // libmetatensor hands out borrowed views of our arrays with destroy = NULL,
    // so recognise them by the other slots
    return array.as_dlpack == vtable::as_dlpack && array.move_data == vtable::move_data &&
           find_array(array.ptr) != nullptr;
}

}  // namespace mtsarray::detail
