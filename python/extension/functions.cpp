#include "functions.hpp"

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mtsarray.h"

#include "conversions.hpp"
#include "errors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace mtsarray_python {

namespace {

[[noreturn]] void raise(PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw nb::python_error();
}

/// Python truth of `value` (NumPy bools included).
bool truthy(nb::handle value) {
    const int result = PyObject_IsTrue(value.ptr());
    if (result < 0) {
        throw nb::python_error();
    }
    return result != 0;
}

constexpr uint16_t bfloat16_exponent_bits = 0x7F80;

/// bfloat16 bits of `value`, rounded once to nearest even (NaN stays NaN,
/// quiet): through float32 rounded to odd (towards zero, its last bit set
/// when anything was dropped), which float32's 16 extra bits make exact.
/// Rounding to nearest float32 first would round twice: a double just below
/// the halfway point between the largest finite bfloat16 and 2^128 becomes
/// that halfway point in float32, which then rounds to infinity.
uint16_t to_bfloat16(double value) {
    const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
    if (std::isnan(value)) {
        return static_cast<uint16_t>(sign | bfloat16_exponent_bits | 0x0040);
    }
    if (std::fabs(value) > static_cast<double>(std::numeric_limits<float>::max())) {
        return static_cast<uint16_t>(sign | bfloat16_exponent_bits);  // past the halfway point: infinity
    }
    float narrowed = static_cast<float>(value);
    if (std::fabs(static_cast<double>(narrowed)) > std::fabs(value)) {
        narrowed = std::nextafter(narrowed, 0.0f);
    }
    uint32_t bits = 0;
    std::memcpy(&bits, &narrowed, sizeof(bits));
    if (static_cast<double>(narrowed) != value) {
        bits |= 1;
    }
    bits += 0x7FFF + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}

/// A binary floating-point format: `precision` significant bits, the
/// largest finite value below 2^(max_exponent + 1).
struct FloatFormat {
    int precision;
    int max_exponent;
};

/// The format of a floating or complex dtype (of its parts), or bfloat16.
FloatFormat float_format(DLDataType dtype) {
    if (dtype.code == kDLBfloat) {
        return {8, 127};
    }
    const unsigned part_bits = dtype.code == kDLComplex ? dtype.bits / 2 : dtype.bits;
    switch (part_bits) {
    case 16: return {11, 15};
    case 32: return {24, 127};
    default: return {53, 1023};
    }
}

/// A new reference to `function(a, b)` of the Python number API.
nb::object number_call(PyObject* (*function)(PyObject*, PyObject*), nb::handle a, nb::handle b) {
    PyObject* result = function(a.ptr(), b.ptr());
    if (result == nullptr) {
        throw nb::python_error();
    }
    return nb::steal(result);
}

/// The Python integer `integer` rounded once, to nearest with ties to even,
/// to `format` -- a double holding that value exactly -- or nothing when it
/// rounds to infinity. Rounding through a double first would round twice:
/// 2**53 + 2**45 + 1 is a double's tie, 2**53 + 2**45, which bfloat16 then
/// rounds (to even) down to 2**53, where 2**53 + 2**46 is nearest.
bool round_integer(nb::handle integer, FloatFormat format, double& rounded) {
    const bool negative = PyObject_RichCompareBool(integer.ptr(), nb::int_(0).ptr(), Py_LT) == 1;
    nb::object magnitude = nb::steal(PyNumber_Absolute(integer.ptr()));
    if (!magnitude.is_valid()) {
        throw nb::python_error();
    }
    const int64_t bits = nb::cast<int64_t>(magnitude.attr("bit_length")());
    int64_t shift = bits > format.precision ? bits - format.precision : 0;
    uint64_t significand = 0;
    if (shift == 0) {
        significand = nb::cast<uint64_t>(magnitude);
    } else {
        const nb::int_ shift_object(shift);
        significand = nb::cast<uint64_t>(number_call(PyNumber_Rshift, magnitude, shift_object));
        nb::object one = nb::int_(1);
        nb::object mask = number_call(PyNumber_Subtract, number_call(PyNumber_Lshift, one, shift_object), one);
        nb::object rest = number_call(PyNumber_And, magnitude, mask);
        nb::object half = number_call(PyNumber_Lshift, one, nb::int_(shift - 1));
        const int above = PyObject_RichCompareBool(rest.ptr(), half.ptr(), Py_GT);
        const int tie = PyObject_RichCompareBool(rest.ptr(), half.ptr(), Py_EQ);
        if (above == 1 || (tie == 1 && (significand & 1) != 0)) {
            significand++;
            if (significand == (uint64_t(1) << format.precision)) {
                significand >>= 1;
                shift++;
            }
        }
    }
    // the leading bit's exponent
    const int64_t exponent = shift + (significand == 0 ? 0 : 64 - __builtin_clzll(significand)) - 1;
    if (significand != 0 && exponent > format.max_exponent) {
        return false;
    }
    rounded = std::ldexp(static_cast<double>(significand), static_cast<int>(shift));
    if (negative) {
        rounded = -rounded;
    }
    return true;
}

/// The bytes of one element of `dtype` holding `value`; rejects values the
/// dtype can not hold (300 in int8, 2.5 in int32, 1j in float64, 1e10 in
/// float16, 2 in bool) rather than wrapping or truncating them.
std::vector<unsigned char> element_bytes(nb::handle value, DLDataType dtype) {
    nb::handle np = numpy();
    nb::object source = np.attr("asarray")(value);
    if (nb::cast<size_t>(source.attr("ndim")) != 0) {
        raise(PyExc_ValueError, "the fill value must be a scalar, got an array of shape " +
                                    text(nb::repr(source.attr("shape"))));
    }
    auto source_kind = nb::cast<std::string>(source.attr("dtype").attr("kind"));
    const bool bfloat16 = dtype.code == kDLBfloat;
    nb::object target = bfloat16 ? np.attr("dtype")("float32") : dtype_object(dtype);
    const auto target_kind = nb::cast<std::string>(target.attr("kind"));
    const auto not_representable = [&]() {
        raise(PyExc_ValueError, "the fill value " + text(nb::repr(value)) + " can not be represented in " +
                                    (bfloat16 ? std::string("bfloat16") : text(target)));
    };
    const bool python_integer = source_kind == "O" && PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr());
    if (python_integer && target_kind != "f" && target_kind != "c") {
        // a Python integer beyond 64 bits (NumPy keeps it as an object):
        // no integer dtype holds it
        not_representable();
    }
    if ((python_integer || source_kind == "i" || source_kind == "u") && (target_kind == "f" || target_kind == "c")) {
        // an integer of any size into a floating dtype (bfloat16's stand-in
        // is float32): rounded once, from the exact integer
        nb::object integer = python_integer ? nb::borrow(value) : source.attr("item")();
        double rounded = 0.0;
        if (!round_integer(integer, float_format(dtype), rounded)) {
            not_representable();
        }
        source = np.attr("asarray")(rounded);  // exact in the dtype: converting it rounds nothing
        source_kind = "f";
    }
    if (source_kind != "b" && source_kind != "i" && source_kind != "u" && source_kind != "f" && source_kind != "c") {
        raise(PyExc_TypeError, "the fill value must be a number, got " + text(nb::repr(value)));
    }

    if (source_kind == "c" && target_kind != "c") {
        if (nb::cast<double>(source.attr("imag")) != 0.0) {
            not_representable();
        }
        source = source.attr("real");
        source_kind = "f";
    }
    if (bfloat16) {
        // NumPy has no bfloat16: rounded here, from the double, and checked
        // after the rounding, where an overflow to infinity shows
        const double number = nb::cast<double>(np.attr("float64")(source));
        const uint16_t bits = to_bfloat16(number);
        if (std::isfinite(number) && (bits & bfloat16_exponent_bits) == bfloat16_exponent_bits) {
            not_representable();
        }
        std::vector<unsigned char> bytes(sizeof(bits));
        std::memcpy(bytes.data(), &bits, sizeof(bits));
        return bytes;
    }
    if (target_kind == "b" || target_kind == "i" || target_kind == "u") {
        // integers and bools take exact integers in their range only
        nb::object exact;
        if (source_kind == "f") {
            const double number = nb::cast<double>(source.attr("item")());
            if (!std::isfinite(number) || number != std::trunc(number)) {
                not_representable();
            }
            exact = nb::steal(PyLong_FromDouble(number));
        } else {
            exact = nb::int_(source.attr("item")());
        }
        nb::object low = target_kind == "b" ? nb::int_(0) : np.attr("iinfo")(target).attr("min");
        nb::object high = target_kind == "b" ? nb::int_(1) : np.attr("iinfo")(target).attr("max");
        if (exact < low || exact > high) {
            not_representable();
        }
        source = exact;
    }
    nb::object converted;
    {
        // an overflow is reported below, as an error, not as a NumPy warning
        nb::object quiet = np.attr("errstate")("over"_a = "ignore");
        quiet.attr("__enter__")();
        try {
            converted = np.attr("asarray")(source, target);
        } catch (...) {
            quiet.attr("__exit__")(nb::none(), nb::none(), nb::none());
            throw;
        }
        quiet.attr("__exit__")(nb::none(), nb::none(), nb::none());
    }
    if (target_kind == "f" || target_kind == "c") {
        // no overflow to infinity (1e10 in float16)
        const bool finite_before = truthy(np.attr("isfinite")(source));
        const bool finite_after = truthy(np.attr("isfinite")(converted));
        if (finite_before && !finite_after) {
            not_representable();
        }
    }
    nb::bytes bytes = nb::cast<nb::bytes>(converted.attr("tobytes")());
    const auto* data = static_cast<const unsigned char*>(bytes.data());
    return std::vector<unsigned char>(data, data + bytes.size());
}

}  // namespace

Array zeros(nb::handle shape, nb::handle dtype, nb::handle device) {
    const auto dimensions = parse_shape(shape);
    const DLDataType dl_dtype = parse_dtype(dtype);
    const DLDevice dl_device = parse_device(device);
    mts_array_t raw = {};
    check(mtsarray_zeros(dl_device, dl_dtype, dimensions.data(), dimensions.size(), &raw));
    return Array::adopt(raw);
}

Array full(nb::handle shape, nb::handle value, nb::handle dtype, nb::handle device) {
    const auto dimensions = parse_shape(shape);
    // no dtype: the one NumPy gives the value (bool, int64, float64, complex128)
    const DLDataType dl_dtype = parse_dtype(dtype.is_none() ? numpy().attr("asarray")(value).attr("dtype") : dtype);
    const DLDevice dl_device = parse_device(device);
    const auto bytes = element_bytes(value, dl_dtype);
    mts_array_t raw = {};
    check(mtsarray_full(dl_device, dl_dtype, dimensions.data(), dimensions.size(), bytes.data(), &raw));
    return Array::adopt(raw);
}

bool backend_available(nb::handle device_type) {
    bool available = false;
    check(mtsarray_backend_available(parse_device_type(device_type), &available));
    return available;
}

int32_t device_count(nb::handle device_type) {
    int32_t count = 0;
    check(mtsarray_device_count(parse_device_type(device_type), &count));
    return count;
}

void set_num_threads(int64_t count) {
    if (count < INT32_MIN || count > INT32_MAX) {
        raise_error("mtsarray_set_num_threads: count = " + std::to_string(count) +
                    " is out of range: host work may use between 1 and 4096 threads");
    }
    mts_status_t status;
    {
        // waits for nothing, but a pool being resized may take a moment
        nb::gil_scoped_release release;
        status = mtsarray_set_num_threads(static_cast<int32_t>(count));
    }
    check(status);
}

int32_t get_num_threads() {
    int32_t count = 0;
    check(mtsarray_get_num_threads(&count));
    return count;
}

std::string backend_unavailable_reason(nb::handle device_type) {
    const char* reason = mtsarray_backend_unavailable_reason(parse_device_type(device_type));
    return reason == nullptr ? "" : reason;
}

void empty_cache(nb::handle device) {
    const DLDevice target = parse_device(device);
    mts_status_t status;
    {
        nb::gil_scoped_release release;
        status = mtsarray_release_cached_memory(target);
    }
    check(status);
}

void set_release_threshold(nb::handle device, int64_t bytes) {
    if (bytes < 0) {
        raise(PyExc_ValueError, "the release threshold is a number of bytes, got " + std::to_string(bytes));
    }
    const DLDevice target = parse_device(device);
    check(mtsarray_set_release_threshold(target, static_cast<uint64_t>(bytes)));
}

uint64_t get_release_threshold(nb::handle device) {
    const DLDevice target = parse_device(device);
    uint64_t bytes = 0;
    check(mtsarray_get_release_threshold(target, &bytes));
    return bytes;
}

uintptr_t tensormap_to(uintptr_t address, nb::handle device, nb::handle stream) {
    if (address == 0) {
        raise(PyExc_ValueError, "tensormap_to: the TensorMap is empty (released)");
    }
    const DLDevice target = parse_device(device);
    const int64_t number = stream_number(stream, target.device_type);
    mts_tensormap_t* result = nullptr;
    mts_status_t status;
    {
        nb::gil_scoped_release release;
        status = mtsarray_tensormap_to(reinterpret_cast<const mts_tensormap_t*>(address), target, number, &result);
    }
    check(status);
    return reinterpret_cast<uintptr_t>(result);
}

Array borrow(uintptr_t address, nb::object owner) {
    if (address == 0) {
        raise(PyExc_ValueError, "a null mts_array_t address");
    }
    return Array::borrow(*reinterpret_cast<const mts_array_t*>(address), std::move(owner));
}

void from_dlpack_into(nb::handle object, uintptr_t address, nb::handle stream) {
    if (address == 0) {
        raise(PyExc_ValueError, "a null mts_array_t address");
    }
    Array array = from_dlpack(object, stream);
    *reinterpret_cast<mts_array_t*>(address) = array.release();
}

nb::object to_numpy(nb::handle array, nb::handle dtype, nb::handle copy) {
    const Array& self = nb::cast<const Array&>(array);
    const DLDevice device = self.dl_device();
    if (device.device_type != kDLCPU && device.device_type != kDLCUDAHost && device.device_type != kDLCUDAManaged &&
        device.device_type != kDLROCMHost) {
        raise(PyExc_TypeError, "this array's data is on " + device_name(device) +
                                   ": NumPy only reads host memory. Copy it first (array.copy('cpu')), or "
                                   "read it with a GPU framework (torch.from_dlpack, cupy.from_dlpack)");
    }
    nb::object result = numpy().attr("from_dlpack")(array);
    if (!dtype.is_none() && !result.attr("dtype").equal(numpy().attr("dtype")(dtype))) {
        if (copy.ptr() == Py_False) {
            raise(PyExc_ValueError, "copy=False, but changing the dtype needs a copy");
        }
        return result.attr("astype")(dtype);
    }
    if (copy.ptr() == Py_True) {
        return result.attr("copy")();
    }
    return result;
}

}  // namespace mtsarray_python
