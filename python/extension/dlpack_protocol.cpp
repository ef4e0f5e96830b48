#include "dlpack_protocol.hpp"

#include <new>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace mtsarray_python {

namespace {

constexpr const char* versioned_name = "dltensor_versioned";
constexpr const char* used_versioned_name = "used_dltensor_versioned";
constexpr const char* legacy_name = "dltensor";
constexpr const char* used_legacy_name = "used_dltensor";

// The capsule destructors run when the capsule dies, possibly while an
// exception is being raised: they keep the error indicator as they found it.
// A renamed ("used_") capsule belongs to its consumer and is left alone.
template <typename Tensor> void release_capsule(PyObject* capsule, const char* name) {
    if (!PyCapsule_IsValid(capsule, name)) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* tensor = static_cast<Tensor*>(PyCapsule_GetPointer(capsule, name));
    if (tensor != nullptr && tensor->deleter != nullptr) {
        tensor->deleter(tensor);
    }
    PyErr_Restore(type, value, traceback);
}

void release_versioned_capsule(PyObject* capsule) {
    release_capsule<DLManagedTensorVersioned>(capsule, versioned_name);
}

void release_legacy_capsule(PyObject* capsule) {
    release_capsule<DLManagedTensor>(capsule, legacy_name);
}

// One of our versioned exports seen through the pre-1.0 struct.
struct LegacyExport {
    DLManagedTensor legacy;
    DLManagedTensorVersioned* versioned;

    static void deleter(DLManagedTensor* tensor) {
        auto* self = static_cast<LegacyExport*>(tensor->manager_ctx);
        if (self->versioned->deleter != nullptr) {
            self->versioned->deleter(self->versioned);
        }
        delete self;
    }
};

// A pre-1.0 producer's tensor seen through the versioned struct, which is
// what mtsarray_from_dlpack takes.
struct LegacyImport {
    DLManagedTensorVersioned versioned;
    DLManagedTensor* legacy;

    static void deleter(DLManagedTensorVersioned* tensor) {
        auto* self = static_cast<LegacyImport*>(tensor->manager_ctx);
        if (self->legacy->deleter != nullptr) {
            self->legacy->deleter(self->legacy);
        }
        delete self;
    }
};

void release(DLManagedTensorVersioned* tensor) noexcept {
    if (tensor != nullptr && tensor->deleter != nullptr) {
        tensor->deleter(tensor);
    }
}

[[noreturn]] void raise(PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw nb::python_error();
}

}  // namespace

nb::object export_capsule(DLManagedTensorVersioned* tensor, bool versioned) {
    if (versioned) {
        PyObject* capsule = PyCapsule_New(tensor, versioned_name, release_versioned_capsule);
        if (capsule == nullptr) {
            release(tensor);
            throw nb::python_error();
        }
        return nb::steal(capsule);
    }
    if ((tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {
        release(tensor);
        raise(PyExc_BufferError, "this array is read-only, which DLPack < 1.0 can not express: "
                                 "pass max_version=(1, 0) to __dlpack__");
    }
    auto* wrapper = new (std::nothrow) LegacyExport{};
    if (wrapper == nullptr) {
        release(tensor);
        raise(PyExc_MemoryError, "could not allocate a DLManagedTensor");
    }
    wrapper->legacy.dl_tensor = tensor->dl_tensor;
    wrapper->legacy.manager_ctx = wrapper;
    wrapper->legacy.deleter = LegacyExport::deleter;
    wrapper->versioned = tensor;
    PyObject* capsule = PyCapsule_New(&wrapper->legacy, legacy_name, release_legacy_capsule);
    if (capsule == nullptr) {
        LegacyExport::deleter(&wrapper->legacy);
        throw nb::python_error();
    }
    return nb::steal(capsule);
}

DLManagedTensorVersioned* consume_capsule(nb::handle capsule) {
    PyObject* object = capsule.ptr();
    if (PyCapsule_IsValid(object, versioned_name)) {
        auto* tensor = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(object, versioned_name));
        if (tensor == nullptr || PyCapsule_SetName(object, used_versioned_name) != 0) {
            throw nb::python_error();
        }
        return tensor;
    }
    if (PyCapsule_IsValid(object, legacy_name)) {
        auto* legacy = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(object, legacy_name));
        if (legacy == nullptr || PyCapsule_SetName(object, used_legacy_name) != 0) {
            throw nb::python_error();
        }
        auto* wrapper = new (std::nothrow) LegacyImport{};
        if (wrapper == nullptr) {
            if (legacy->deleter != nullptr) {
                legacy->deleter(legacy);
            }
            raise(PyExc_MemoryError, "could not allocate a DLManagedTensorVersioned");
        }
        wrapper->versioned.version = {1, 0};
        wrapper->versioned.manager_ctx = wrapper;
        wrapper->versioned.deleter = LegacyImport::deleter;
        wrapper->versioned.flags = 0;
        wrapper->versioned.dl_tensor = legacy->dl_tensor;
        wrapper->legacy = legacy;
        return &wrapper->versioned;
    }
    if (PyCapsule_CheckExact(object)) {
        const char* name = PyCapsule_GetName(object);
        raise(PyExc_TypeError, std::string("expected an unconsumed DLPack capsule, got a capsule named '") +
                                   (name == nullptr ? "" : name) + "' (a capsule can be consumed only once)");
    }
    raise(PyExc_TypeError, "__dlpack__ returned " + nb::cast<std::string>(nb::repr(nb::type_name(capsule.type()))) +
                               ", not a DLPack capsule");
}

const DLPackExchangeAPI* exchange_api(PyTypeObject* type) {
    // (type, API) pairs; the types are kept alive so that their address is
    // never reused by another type. A few entries at most in practice: past
    // 64 distinct types (made at run time?) the look-up is just not cached.
    static auto& cache = *new std::vector<std::pair<PyObject*, const DLPackExchangeAPI*>>();
    for (const auto& [known, api] : cache) {
        if (known == reinterpret_cast<PyObject*>(type)) {
            return api;
        }
    }
    const DLPackExchangeAPI* api = nullptr;
    PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
    if (capsule == nullptr) {
        PyErr_Clear();
    } else {
        if (PyCapsule_IsValid(capsule, "dlpack_exchange_api")) {
            auto* header = static_cast<DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
            while (header != nullptr && header->version.major != DLPACK_MAJOR_VERSION) {
                header = header->prev_api;
            }
            if (header != nullptr) {
                api = reinterpret_cast<const DLPackExchangeAPI*>(header);
                if (api->managed_tensor_from_py_object_no_sync == nullptr || api->current_work_stream == nullptr) {
                    api = nullptr;
                }
            }
        }
        Py_DECREF(capsule);
    }
    if (cache.size() < 64) {
        Py_INCREF(type);
        cache.emplace_back(reinterpret_cast<PyObject*>(type), api);
    }
    return api;
}

nb::object request_capsule(nb::handle producer, PyObject* stream) {
    // interned once and kept for the life of the process (never released:
    // static destructors run after the interpreter is gone)
    static PyObject* const dlpack_name = PyUnicode_InternFromString("__dlpack__");
    static PyObject* const max_version =
        nb::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION).release().ptr();
    static PyObject* const with_stream = nb::make_tuple("stream", "max_version").release().ptr();
    static PyObject* const without_stream = nb::make_tuple("max_version").release().ptr();
    static PyObject* const legacy_with_stream = nb::make_tuple("stream").release().ptr();

    nb::object method = nb::steal(PyObject_GetAttr(producer.ptr(), dlpack_name));
    if (!method.is_valid()) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            throw nb::python_error();
        }
        PyErr_Clear();
        raise(PyExc_TypeError, "from_dlpack: " + nb::cast<std::string>(nb::type_name(producer.type())) +
                                   " does not support DLPack (it has no __dlpack__ method)");
    }

    PyObject* arguments[2];
    size_t count = 0;
    if (stream != nullptr) {
        arguments[count++] = stream;
    }
    arguments[count++] = max_version;
    PyObject* names = stream != nullptr ? with_stream : without_stream;
    PyObject* capsule = PyObject_Vectorcall(method.ptr(), arguments, 0, names);
    if (capsule != nullptr) {
        return nb::steal(capsule);
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
        throw nb::python_error();
    }
    // a producer older than the 2023.12 standard: no max_version
    PyErr_Clear();
    capsule = PyObject_Vectorcall(method.ptr(), arguments, 0, stream != nullptr ? legacy_with_stream : nullptr);
    if (capsule == nullptr) {
        throw nb::python_error();
    }
    return nb::steal(capsule);
}

}  // namespace mtsarray_python
