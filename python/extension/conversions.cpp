#include "conversions.hpp"

#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <utility>

namespace nb = nanobind;

namespace mtsarray_python {

namespace {

[[noreturn]] void raise(PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw nb::python_error();
}

std::string describe(nb::handle value) {
    return nb::cast<std::string>(nb::repr(value));
}

/// A Python int (not a bool) as int64_t; `what` names it in errors.
int64_t integer(nb::handle value, const char* what) {
    if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
        raise(PyExc_TypeError, std::string(what) + " must be an integer, got " + describe(value));
    }
    nb::object index = nb::steal(PyNumber_Index(value.ptr()));
    if (!index.is_valid()) {
        throw nb::python_error();
    }
    int overflow = 0;
    const long long result = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0) {
        raise(PyExc_OverflowError, std::string(what) + " = " + describe(value) + " does not fit in 64 bits");
    }
    if (result == -1 && PyErr_Occurred()) {
        throw nb::python_error();
    }
    return result;
}

struct DeviceName {
    const char* name;
    DLDeviceType type;
    bool has_index;  // shown as name:index
};

constexpr DeviceName device_names[] = {
    {"cpu", kDLCPU, false},
    {"cuda", kDLCUDA, true},
    {"rocm", kDLROCM, true},
    {"cuda_host", kDLCUDAHost, false},
    {"cuda_managed", kDLCUDAManaged, true},
    {"rocm_host", kDLROCMHost, false},
};

[[noreturn]] void unknown_device(const std::string& text) {
    raise(PyExc_ValueError, "unknown device '" + text +
                                "': expected 'cpu', 'cuda', 'cuda:N', 'rocm', 'rocm:N', 'cuda_host', "
                                "'cuda_managed[:N]' or 'rocm_host'");
}

DLDevice parse_device_string(const std::string& text) {
    const auto colon = text.find(':');
    const std::string name = text.substr(0, colon);
    for (const auto& known : device_names) {
        if (name != known.name) {
            continue;
        }
        int32_t index = 0;
        if (colon != std::string::npos) {
            const std::string digits = text.substr(colon + 1);
            if (digits.empty() || digits.size() > 9 ||
                digits.find_first_not_of("0123456789") != std::string::npos) {
                unknown_device(text);
            }
            index = static_cast<int32_t>(std::stol(digits));
            if (!known.has_index && index != 0) {
                unknown_device(text);
            }
        }
        return DLDevice{known.type, index};
    }
    unknown_device(text);
}

std::string numpy_name(DLDataType dtype) {
    switch (dtype.code) {
    case kDLBool: return dtype.bits == 8 ? "bool" : "";
    case kDLInt: return "int" + std::to_string(dtype.bits);
    case kDLUInt: return "uint" + std::to_string(dtype.bits);
    case kDLFloat: return "float" + std::to_string(dtype.bits);
    case kDLComplex: return "complex" + std::to_string(dtype.bits);
    default: return "";
    }
}

std::string dlpack_only_name(DLDataType dtype) {
    switch (dtype.code) {
    case kDLBfloat: return "bfloat" + std::to_string(dtype.bits);
    case kDLFloat8_e3m4: return "float8_e3m4";
    case kDLFloat8_e4m3: return "float8_e4m3";
    case kDLFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    default: return "dlpack_dtype(code=" + std::to_string(dtype.code) + ", bits=" + std::to_string(dtype.bits) + ")";
    }
}

bool is_rocm(DLDeviceType type) {
    return type == kDLROCM || type == kDLROCMHost;
}

bool is_cuda(DLDeviceType type) {
    return type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged;
}

}  // namespace

std::string text(nb::handle value) {
    nb::object result = nb::steal(PyObject_Str(value.ptr()));
    if (!result.is_valid()) {
        throw nb::python_error();
    }
    return nb::cast<std::string>(result);
}

nb::handle numpy() {
    // kept for the life of the process, like every cached Python object here
    static PyObject* const module = nb::module_::import_("numpy").release().ptr();
    return module;
}

DLDevice parse_device(nb::handle device) {
    if (PyUnicode_Check(device.ptr())) {
        return parse_device_string(nb::cast<std::string>(device));
    }
    if (PyTuple_Check(device.ptr()) || PyList_Check(device.ptr())) {
        nb::sequence items = nb::borrow<nb::sequence>(device);
        if (nb::len(items) != 2) {
            raise(PyExc_ValueError, "a device tuple is (device_type, device_id), got " + describe(device));
        }
        if (PyUnicode_Check(items[0].ptr())) {  // ("cuda", 1), as torch.device("cuda", 1)
            const std::string name = nb::cast<std::string>(items[0]);
            const int64_t id = integer(items[1], "the device id");
            if (name.find(':') != std::string::npos || id < 0 || id > INT32_MAX) {
                raise(PyExc_ValueError, "invalid device " + describe(device) +
                                            ": a device tuple is (name, device_id) such as ('cuda', 1), or a "
                                            "DLPack (device_type, device_id)");
            }
            return parse_device_string(name + ":" + std::to_string(id));
        }
        const int64_t type = integer(items[0], "the device type");
        const int64_t id = integer(items[1], "the device id");
        if (type < 0 || type > INT_MAX || id < 0 || id > INT32_MAX) {
            raise(PyExc_ValueError, "invalid DLPack device " + describe(device));
        }
        return DLDevice{static_cast<DLDeviceType>(type), static_cast<int32_t>(id)};
    }
    if (nb::hasattr(device, "type") && nb::hasattr(device, "index")) {  // torch.device
        nb::object type = device.attr("type");
        nb::object index = device.attr("index");
        if (PyUnicode_Check(type.ptr())) {
            std::string text = nb::cast<std::string>(type);
            if (!index.is_none()) {
                text += ":" + std::to_string(integer(index, "the device index"));
            }
            return parse_device_string(text);
        }
    }
    raise(PyExc_TypeError, "a device is a string such as 'cpu' or 'cuda:0', a (name, device_id) tuple such as "
                           "('cuda', 1), or a DLPack (device_type, device_id) tuple, got " + describe(device));
}

std::string device_name(DLDevice device) {
    for (const auto& known : device_names) {
        if (known.type == device.device_type) {
            if (known.has_index) {
                return std::string(known.name) + ":" + std::to_string(device.device_id);
            }
            return known.name;
        }
    }
    return "dlpack_device(" + std::to_string(static_cast<int>(device.device_type)) + "):" +
           std::to_string(device.device_id);
}

DLDeviceType parse_device_type(nb::handle device_type) {
    if (PyUnicode_Check(device_type.ptr())) {
        return parse_device_string(nb::cast<std::string>(device_type)).device_type;
    }
    const int64_t type = integer(device_type, "the device type");
    if (type < 0 || type > INT_MAX) {
        raise(PyExc_ValueError, "invalid DLPack device type " + describe(device_type));
    }
    return static_cast<DLDeviceType>(type);
}

DLDataType parse_dtype(nb::handle dtype) {
    if (PyUnicode_Check(dtype.ptr()) && nb::cast<std::string>(dtype) == "bfloat16") {
        return DLDataType{kDLBfloat, 16, 1};
    }
    nb::object parsed;
    try {
        parsed = numpy().attr("dtype")(dtype);
    } catch (nb::python_error& error) {
        raise(PyExc_TypeError, "dtype " + describe(dtype) + " is not a NumPy dtype: " + error.what());
    }
    const auto kind = nb::cast<std::string>(parsed.attr("kind"));
    const auto itemsize = nb::cast<int64_t>(parsed.attr("itemsize"));
    const bool native = nb::cast<bool>(parsed.attr("isnative"));
    const auto describe = [&]() { return text(parsed); };
    if (!native) {
        raise(PyExc_TypeError, "dtype " + describe() + " is not in the machine's byte order");
    }
    if (kind == "b") {
        return DLDataType{kDLBool, 8, 1};
    }
    if ((kind == "i" || kind == "u") && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) {
        return DLDataType{static_cast<uint8_t>(kind == "i" ? kDLInt : kDLUInt), static_cast<uint8_t>(8 * itemsize), 1};
    }
    if (kind == "f" && (itemsize == 2 || itemsize == 4 || itemsize == 8)) {
        return DLDataType{kDLFloat, static_cast<uint8_t>(8 * itemsize), 1};
    }
    if (kind == "c" && (itemsize == 8 || itemsize == 16)) {
        return DLDataType{kDLComplex, static_cast<uint8_t>(8 * itemsize), 1};
    }
    raise(PyExc_TypeError, "dtype " + describe() +
                               " is not supported: mtsarray stores bool, int8 to int64, uint8 to uint64, "
                               "float16 to float64, complex64, complex128 and bfloat16 data");
}

nb::object dtype_object(DLDataType dtype) {
    static auto& cache = *new std::map<std::pair<uint8_t, uint8_t>, nb::object>();
    if (dtype.lanes != 1) {
        return nb::str((dlpack_only_name(dtype) + "x" + std::to_string(dtype.lanes)).c_str());
    }
    const auto key = std::make_pair(dtype.code, dtype.bits);
    auto found = cache.find(key);
    if (found != cache.end()) {
        return found->second;
    }
    const std::string name = numpy_name(dtype);
    nb::object result;
    if (!name.empty()) {
        try {
            result = numpy().attr("dtype")(name.c_str());
        } catch (nb::python_error&) {
            result = nb::object();
        }
    }
    if (!result.is_valid()) {
        result = nb::str(dlpack_only_name(dtype).c_str());
    }
    cache.emplace(key, result);
    return result;
}

bool is_stream_object(nb::handle stream) {
    return !stream.is_none() && !PyLong_Check(stream.ptr());
}

int64_t default_stream_number(DLDeviceType device_type) {
    if (device_type == kDLCUDA) {
        return 1;
    }
    if (device_type == kDLROCM) {
        return 0;
    }
    return -1;
}

int64_t stream_number(nb::handle stream, DLDeviceType device_type) {
    if (stream.is_none()) {
        return default_stream_number(device_type);
    }
    if (PyLong_Check(stream.ptr())) {
        return integer(stream, "the stream");
    }
    nb::object handle;
    if (nb::hasattr(stream, "cuda_stream")) {  // torch.cuda.Stream, ExternalStream
        handle = stream.attr("cuda_stream");
    } else if (nb::hasattr(stream, "__cuda_stream__")) {  // the CUDA stream protocol: (version, handle)
        nb::object pair = stream.attr("__cuda_stream__")();
        if (!PyTuple_Check(pair.ptr())) {
            raise(PyExc_TypeError, "__cuda_stream__() of a stream object returns a (version, handle) tuple, got " +
                                       describe(pair) + " from " + describe(stream));
        }
        if (PyTuple_GET_SIZE(pair.ptr()) < 2) {
            raise(PyExc_ValueError, "__cuda_stream__() of a stream object returns a (version, handle) tuple, got " +
                                        describe(pair) + " from " + describe(stream));
        }
        handle = nb::borrow(PyTuple_GET_ITEM(pair.ptr(), 1));
    } else if (nb::hasattr(stream, "ptr")) {  // cupy.cuda.Stream
        handle = stream.attr("ptr");
    } else {
        raise(PyExc_TypeError, "a stream is a DLPack stream number (int) or a stream object (torch.cuda.Stream, "
                               "cupy.cuda.Stream, or anything with __cuda_stream__), got " + describe(stream));
    }
    const int64_t number = integer(handle, "the stream handle");
    if (number == 0) {
        // the handle of the default stream: its DLPack number differs per runtime
        if (is_rocm(device_type)) {
            return 0;
        }
        if (is_cuda(device_type)) {
            return 1;
        }
    }
    return number;
}

std::vector<uintptr_t> parse_shape(nb::handle shape, bool allow_infer) {
    std::vector<uintptr_t> result;
    const auto add = [&](nb::handle value, size_t axis) {
        const int64_t dimension = integer(value, "a dimension of the shape");
        if (dimension < 0) {
            if (allow_infer && dimension == -1) {
                for (auto previous : result) {
                    if (previous == SIZE_MAX) {
                        raise(PyExc_ValueError, "only one dimension of the shape can be -1, got " + describe(shape));
                    }
                }
                result.push_back(SIZE_MAX);
                return;
            }
            raise(PyExc_ValueError, "dimension " + std::to_string(axis) + " of the shape " + describe(shape) +
                                        " is negative");
        }
        result.push_back(static_cast<uintptr_t>(dimension));
    };
    if (PyIndex_Check(shape.ptr()) && !PyBool_Check(shape.ptr())) {
        add(shape, 0);
        return result;
    }
    if (!PySequence_Check(shape.ptr()) || PyUnicode_Check(shape.ptr())) {
        raise(PyExc_TypeError, "a shape is an int or a sequence of ints, got " + describe(shape));
    }
    nb::sequence items = nb::borrow<nb::sequence>(shape);
    const size_t count = nb::len(items);
    result.reserve(count);
    for (size_t axis = 0; axis < count; axis++) {
        add(items[axis], axis);
    }
    return result;
}

nb::tuple shape_tuple(const uintptr_t* shape, uintptr_t count) {
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(count));
    if (tuple == nullptr) {
        throw nb::python_error();
    }
    nb::tuple result = nb::steal<nb::tuple>(tuple);
    for (uintptr_t axis = 0; axis < count; axis++) {
        PyObject* dimension = PyLong_FromSize_t(shape[axis]);
        if (dimension == nullptr) {
            throw nb::python_error();
        }
        PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(axis), dimension);
    }
    return result;
}

}  // namespace mtsarray_python
