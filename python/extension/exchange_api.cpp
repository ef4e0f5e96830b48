#include "exchange_api.hpp"

#include <exception>
#include <string>
#include <vector>

#include "mtsarray.h"

#include "array.hpp"

namespace nb = nanobind;

namespace mtsarray_python {

namespace {

// These functions are called from C, with the GIL held (DLPack 1.3: they
// report errors as Python exceptions): none may let a C++ exception out.

/// Sets the Python error of a failed C call, or of a C++ exception.
void set_error_from_last_error(const char* function) {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    PyErr_Format(PyExc_BufferError, "%s: %s", function, message == nullptr ? "unknown error" : message);
}

int managed_tensor_from_py_object(void* py_object, DLManagedTensorVersioned** out) {
    static const char* const name = "MtsArray.__dlpack_c_exchange_api__.managed_tensor_from_py_object_no_sync";
    if (out == nullptr) {
        PyErr_Format(PyExc_ValueError, "%s: out is NULL", name);
        return -1;
    }
    *out = nullptr;
    try {
        Array* array = nullptr;
        if (!nb::try_cast<Array*>(nb::handle(static_cast<PyObject*>(py_object)), array) || array == nullptr) {
            PyErr_Format(PyExc_TypeError, "%s: expected an MtsArray", name);
            return -1;
        }
        const mts_array_t& raw = array->raw();
        DLDevice device = {};
        if (raw.device(raw.ptr, &device) != MTS_SUCCESS) {
            set_error_from_last_error(name);
            return -1;
        }
        const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        // stream NULL: the consumer's work goes on the device's default
        // stream, the one current_work_stream names (see the header)
        if (raw.as_dlpack(raw.ptr, out, device, nullptr, version) != MTS_SUCCESS) {
            *out = nullptr;
            set_error_from_last_error(name);
            return -1;
        }
        return 0;
    } catch (const std::exception& error) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s", name, error.what());
        return -1;
    }
}

int managed_tensor_to_py_object(DLManagedTensorVersioned* tensor, void** out_py_object) {
    static const char* const name = "MtsArray.__dlpack_c_exchange_api__.managed_tensor_to_py_object_no_sync";
    if (out_py_object == nullptr) {
        PyErr_Format(PyExc_ValueError, "%s: out_py_object is NULL", name);
        if (tensor != nullptr && tensor->deleter != nullptr) {
            tensor->deleter(tensor);  // the tensor is stolen, also on failure
        }
        return -1;
    }
    *out_py_object = nullptr;
    try {
        mts_array_t raw = {};
        // takes the tensor in every case (mtsarray_from_dlpack releases it on failure)
        if (mtsarray_from_dlpack(tensor, &raw) != MTS_SUCCESS) {
            set_error_from_last_error(name);
            return -1;
        }
        nb::object object = nb::cast(Array::adopt(raw));
        *out_py_object = object.release().ptr();
        return 0;
    } catch (nb::python_error& error) {
        error.restore();
        return -1;
    } catch (const std::exception& error) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s", name, error.what());
        return -1;
    }
}

int managed_tensor_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                             void (*set_error)(void* error_ctx, const char* kind, const char* message)) {
    const auto fail = [&](const char* kind, const std::string& message) {
        const std::string text = "MtsArray.__dlpack_c_exchange_api__.managed_tensor_allocator: " + message;
        if (set_error != nullptr) {
            set_error(error_ctx, kind, text.c_str());
        }
        return -1;
    };
    if (out == nullptr) {
        return fail("ValueError", "out is NULL");
    }
    *out = nullptr;
    if (prototype == nullptr || prototype->ndim < 0 || (prototype->ndim > 0 && prototype->shape == nullptr)) {
        return fail("ValueError", "the prototype has no shape");
    }
    try {
        std::vector<uintptr_t> shape;
        for (int32_t axis = 0; axis < prototype->ndim; axis++) {
            if (prototype->shape[axis] < 0) {
                return fail("ValueError", "the prototype has a negative dimension");
            }
            shape.push_back(static_cast<uintptr_t>(prototype->shape[axis]));
        }
        mts_array_t array = {};
        if (mtsarray_zeros(prototype->device, prototype->dtype, shape.data(), shape.size(), &array) != MTS_SUCCESS) {
            const char* message = nullptr;
            mts_last_error(&message, nullptr, nullptr);
            return fail("RuntimeError", message == nullptr ? "unknown error" : message);
        }
        const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        const mts_status_t status = array.as_dlpack(array.ptr, out, prototype->device, nullptr, version);
        array.destroy(array.ptr);  // the export keeps the memory alive
        if (status != MTS_SUCCESS) {
            *out = nullptr;
            const char* message = nullptr;
            mts_last_error(&message, nullptr, nullptr);
            return fail("RuntimeError", message == nullptr ? "unknown error" : message);
        }
        return 0;
    } catch (const std::exception& error) {
        return fail("RuntimeError", error.what());
    }
}

int current_work_stream(DLDeviceType /*device_type*/, int32_t /*device_id*/, void** out_current_stream) {
    if (out_current_stream == nullptr) {
        PyErr_SetString(PyExc_ValueError, "MtsArray.__dlpack_c_exchange_api__.current_work_stream: "
                                          "out_current_stream is NULL");
        return -1;
    }
    // the device's default stream, on which exports are ordered (see the header)
    *out_current_stream = nullptr;
    return 0;
}

const DLPackExchangeAPI* exchange_api_table() {
    static const DLPackExchangeAPI table = [] {
        DLPackExchangeAPI api = {};
        api.header.version.major = DLPACK_MAJOR_VERSION;
        api.header.version.minor = DLPACK_MINOR_VERSION;
        api.header.prev_api = nullptr;
        api.managed_tensor_allocator = managed_tensor_allocator;
        api.managed_tensor_from_py_object_no_sync = managed_tensor_from_py_object;
        api.managed_tensor_to_py_object_no_sync = managed_tensor_to_py_object;
        // optional (DLPack 1.3): a borrowed DLTensor needs shape and strides
        // that live as long as the object, which an export makes per call
        api.dltensor_from_py_object_no_sync = nullptr;
        api.current_work_stream = current_work_stream;
        return api;
    }();
    return &table;
}

}  // namespace

void publish_exchange_api(nb::handle array_type) {
    // the table lives for the process: the capsule has nothing to free
    nb::capsule capsule(static_cast<const void*>(exchange_api_table()), "dlpack_exchange_api");
    nb::setattr(array_type, "__dlpack_c_exchange_api__", capsule);
}

}  // namespace mtsarray_python
