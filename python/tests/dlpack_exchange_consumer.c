/* A consumer of the DLPack C exchange API (`__dlpack_c_exchange_api__`,
 * DLPack 1.3), written as a C extension library would: it finds the table on
 * the object's type, checks its version, and takes tensors through it with no
 * Python call. python/tests/test_exchange_api.py and bench/python_overhead.py
 * compile it (exchange_consumer.py) and call it through ctypes.PyDLL, the GIL
 * held, so that a Python error set here is raised there. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include <dlpack/dlpack.h>

/* The table of `object`'s type, or NULL with a Python error set. */
static const DLPackExchangeAPI* find_api(PyObject* object) {
    PyObject* capsule = PyObject_GetAttrString((PyObject*)Py_TYPE(object), "__dlpack_c_exchange_api__");
    if (capsule == NULL) {
        return NULL;
    }
    const DLPackExchangeAPIHeader* header = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    Py_DECREF(capsule); /* the table lives for the process, not the capsule */
    while (header != NULL && header->version.major != DLPACK_MAJOR_VERSION) {
        header = header->prev_api;
    }
    if (header == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "no exchange API of DLPack major version 1");
        }
        return NULL;
    }
    return (const DLPackExchangeAPI*)header;
}

/* version major, minor; then 1 for each non-NULL function, in table order */
int consumer_describe(PyObject* object, int64_t* out) {
    const DLPackExchangeAPI* api = find_api(object);
    if (api == NULL) {
        return -1;
    }
    out[0] = api->header.version.major;
    out[1] = api->header.version.minor;
    out[2] = api->header.prev_api != NULL;
    out[3] = api->managed_tensor_allocator != NULL;
    out[4] = api->managed_tensor_from_py_object_no_sync != NULL;
    out[5] = api->managed_tensor_to_py_object_no_sync != NULL;
    out[6] = api->dltensor_from_py_object_no_sync != NULL;
    out[7] = api->current_work_stream != NULL;
    return 0;
}

/* Takes `object` through the table: its device, ndim, shape (up to 4), the
 * current work stream of its device, and the sum of its float64 elements
 * (host memory, C-contiguous). The tensor is released before returning. */
int consumer_read(PyObject* object, int64_t* out, double* sum) {
    const DLPackExchangeAPI* api = find_api(object);
    if (api == NULL) {
        return -1;
    }
    DLManagedTensorVersioned* tensor = NULL;
    if (api->managed_tensor_from_py_object_no_sync(object, &tensor) != 0) {
        return -1;
    }
    const DLTensor* t = &tensor->dl_tensor;
    void* stream = (void*)0x1234;
    if (api->current_work_stream(t->device.device_type, t->device.device_id, &stream) != 0) {
        tensor->deleter(tensor);
        return -1;
    }
    out[0] = t->device.device_type;
    out[1] = t->device.device_id;
    out[2] = t->ndim;
    out[3] = (int64_t)(intptr_t)stream;
    out[4] = tensor->version.major;
    out[5] = (int64_t)tensor->flags;
    int64_t count = 1;
    for (int32_t axis = 0; axis < t->ndim; axis++) {
        if (axis < 4) {
            out[6 + axis] = t->shape[axis];
        }
        count *= t->shape[axis];
    }
    *sum = 0;
    if (t->device.device_type == kDLCPU && t->dtype.code == kDLFloat && t->dtype.bits == 64) {
        const double* data = (const double*)((const char*)t->data + t->byte_offset);
        for (int64_t i = 0; i < count; i++) {
            *sum += data[i];
        }
    }
    tensor->deleter(tensor);
    return 0;
}

/* A float64 array of `count` elements made through the table's allocator
 * (on the CPU), filled with 0, 1, 2, ... here, and handed back to Python
 * through managed_tensor_to_py_object_no_sync: a new reference, or NULL
 * with a Python error set. */
static void set_error(void* context, const char* kind, const char* message) {
    (void)context;
    PyObject* type = strcmp(kind, "ValueError") == 0 ? PyExc_ValueError : PyExc_RuntimeError;
    PyErr_SetString(type, message);
}

PyObject* consumer_allocate(PyObject* object, int64_t count, int32_t dtype_bits) {
    const DLPackExchangeAPI* api = find_api(object);
    if (api == NULL) {
        return NULL;
    }
    int64_t shape[1] = {count};
    DLTensor prototype;
    memset(&prototype, 0, sizeof(prototype));
    prototype.device.device_type = kDLCPU;
    prototype.ndim = count < 0 ? -1 : 1;
    prototype.dtype.code = kDLFloat;
    prototype.dtype.bits = (uint8_t)dtype_bits;
    prototype.dtype.lanes = 1;
    prototype.shape = shape;
    DLManagedTensorVersioned* tensor = NULL;
    if (api->managed_tensor_allocator(&prototype, &tensor, NULL, set_error) != 0) {
        return NULL;
    }
    double* data = (double*)tensor->dl_tensor.data;
    for (int64_t i = 0; i < count; i++) {
        data[i] = (double)i;
    }
    void* result = NULL;
    if (api->managed_tensor_to_py_object_no_sync(tensor, &result) != 0) {
        return NULL;
    }
    return (PyObject*)result;
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + 1e-9 * (double)time.tv_nsec;
}

/* Seconds per hand-off of `object` to this consumer, over `calls` calls,
 * each taking a tensor and releasing it: through the table (`through_api`),
 * or through `object.__dlpack__(max_version=(1, 3))` and its capsule, as a C
 * consumer without the table does. Negative with a Python error set. */
double consumer_time(PyObject* object, int64_t calls, int32_t through_api) {
    const DLPackExchangeAPI* api = find_api(object);
    if (api == NULL) {
        return -1;
    }
    PyObject* name = PyUnicode_FromString("__dlpack__");
    PyObject* kwnames = Py_BuildValue("(s)", "max_version");
    PyObject* version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    double result = -1;
    const double start = now();
    for (int64_t call = 0; call < calls; call++) {
        DLManagedTensorVersioned* tensor = NULL;
        if (through_api) {
            if (api->managed_tensor_from_py_object_no_sync(object, &tensor) != 0) {
                goto done;
            }
        } else {
            PyObject* args[2] = {object, version};
            PyObject* capsule = PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
            if (capsule == NULL) {
                goto done;
            }
            tensor = PyCapsule_GetPointer(capsule, "dltensor_versioned");
            if (tensor == NULL || PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
                Py_DECREF(capsule);
                goto done;
            }
            Py_DECREF(capsule);
        }
        tensor->deleter(tensor);
    }
    result = (now() - start) / (double)calls;
done:
    Py_DECREF(name);
    Py_DECREF(kwnames);
    Py_DECREF(version);
    return result;
}
