#include "array.hpp"

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "mtsarray.h"

#include "conversions.hpp"
#include "dlpack_protocol.hpp"
#include "errors.hpp"
#include "foreign_tensor.hpp"

namespace nb = nanobind;

namespace mtsarray_python {

static_assert(sizeof(mts_data_movement_t) == 5 * sizeof(uint64_t),
              "move_data passes (N, 5) arrays of 64-bit integers as mts_data_movement_t");

/// Marks an array as used by an operation that runs with the GIL released;
/// built and destroyed with the GIL held.
class Busy {
public:
    explicit Busy(const Array& array) : array_(array) { array_.busy_++; }
    ~Busy() { array_.busy_--; }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

private:
    const Array& array_;
};

namespace {

[[noreturn]] void raise(PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw nb::python_error();
}

bool is_host_accessible(DLDeviceType type) {
    return type == kDLCPU || type == kDLCUDAHost || type == kDLCUDAManaged || type == kDLROCMHost;
}

bool same_device(DLDevice a, DLDevice b) {
    return a.device_type == b.device_type && a.device_id == b.device_id;
}

/// Whether mtsarray_from_dlpack surely takes `tensor` without a copy (then
/// it returns at once and the GIL can stay held); false when it may copy,
/// or when the tensor is not well-formed (the library then says why). The
/// tensor comes from a producer and is not validated yet: its shape and
/// strides are read only when its header says they are there (ndim >= 0,
/// pointers not NULL), and only as far as their products fit in 64 bits.
bool imports_without_copy(const DLManagedTensorVersioned* tensor) {
    if (tensor == nullptr || tensor->version.major != 1 || (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {
        return false;
    }
    const DLTensor& t = tensor->dl_tensor;
    if (t.ndim < 0 || (t.ndim != 0 && t.shape == nullptr)) {
        return false;
    }
    if (t.strides == nullptr) {
        return true;
    }
    int64_t expected = 1;
    for (int32_t axis = t.ndim - 1; axis >= 0; axis--) {
        const int64_t size = t.shape[axis];
        if (size < 0) {
            return false;
        }
        if (size != 1 && t.strides[axis] != expected) {
            return false;
        }
        if (__builtin_mul_overflow(expected, size, &expected)) {
            return false;
        }
    }
    return true;
}

// ---- the movements of move_data --------------------------------------------

/// An (N, 5) C-contiguous array of 64-bit integers, read in place through the
/// buffer protocol: its rows are the mts_data_movement_t themselves.
class Movements {
public:
    explicit Movements(nb::handle movements) {
        if (read(movements)) {
            return;
        }
        // anything else (lists, other integer widths, strided arrays): through NumPy, once
        nb::object array = numpy().attr("asarray")(movements);
        auto kind = nb::cast<std::string>(array.attr("dtype").attr("kind"));
        const auto shape = nb::cast<nb::tuple>(array.attr("shape"));
        const size_t size = nb::cast<size_t>(array.attr("size"));
        const bool rows_of_five = nb::len(shape) == 2 && nb::cast<size_t>(shape[1]) == 5;
        if (size == 0 && (rows_of_five || nb::len(shape) == 1)) {
            return;  // no movements: an empty sequence ([], ()) or an empty (0, 5) array
        }
        if (kind != "i" && kind != "u" && (kind == "f" || kind == "O")) {
            // Python integers NumPy could not fit in one integer type (2**63
            // beside a negative number: float64; 2**64: object): say which
            // one is wrong, or take them as uint64 when all fit
            kind = python_integers_kind(movements, shape);
            if (kind == "u") {
                array = numpy().attr("asarray")(movements, "uint64");
            }
        }
        if (kind != "i" && kind != "u") {
            raise(PyExc_TypeError, "movements must be integers, got an array of " +
                                       text(array.attr("dtype")));
        }
        if (!rows_of_five) {
            raise(PyExc_ValueError, "movements must have the shape (N, 5): rows of (sample_in, sample_out, "
                                    "properties_start_in, properties_start_out, properties_length), got shape " +
                                        nb::cast<std::string>(nb::repr(shape)));
        }
        converted_ = numpy().attr("ascontiguousarray")(array, kind == "u" ? "uint64" : "int64");
        if (!read(converted_)) {
            raise(PyExc_RuntimeError, "move_data: could not read the converted movements");
        }
    }

    ~Movements() {
        if (has_view_) {
            PyBuffer_Release(&view_);
        }
    }
    Movements(const Movements&) = delete;
    Movements& operator=(const Movements&) = delete;

    const mts_data_movement_t* data() const { return data_; }
    uintptr_t count() const { return count_; }

    /// After a failed call: a ValueError naming the first negative entry, if
    /// there is one (its bits read as a huge size_t, which mtsarray reported
    /// as out of range).
    void raise_if_negative() const {
        if (!is_signed_) {
            return;
        }
        const auto* values = reinterpret_cast<const int64_t*>(data_);
        for (uintptr_t i = 0; i < 5 * count_; i++) {
            if (values[i] < 0) {
                raise(PyExc_ValueError, "movements[" + std::to_string(i / 5) + ", " + std::to_string(i % 5) + "] (" +
                                            columns[i % 5] + ") is negative: " + std::to_string(values[i]));
            }
        }
    }

private:
    static constexpr const char* columns[] = {"sample_in", "sample_out", "properties_start_in", "properties_start_out",
                                              "properties_length"};

    /// When `movements` (of NumPy shape `shape`) holds only Python
    /// integers: raises ValueError naming the first one that is negative or
    /// does not fit in 64 bits, else returns "u" (they all fit in uint64).
    /// Returns "" when they are not all integers.
    static std::string python_integers_kind(nb::handle movements, const nb::tuple& shape) {
        nb::object objects;
        try {
            objects = numpy().attr("asarray")(movements, "object");
        } catch (const nb::python_error&) {
            return "";
        }
        if (!objects.attr("shape").equal(shape)) {
            return "";
        }
        nb::object items = objects.attr("ravel")();
        const size_t count = nb::len(items);
        for (size_t i = 0; i < count; i++) {
            nb::object item = items[i];
            if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr())) {
                return "";
            }
        }
        const nb::int_ zero(0);
        const nb::object limit = nb::int_(1).attr("__lshift__")(64);
        for (size_t i = 0; i < count; i++) {
            nb::object item = items[i];
            const bool row_of_five = nb::len(shape) == 2 && nb::cast<size_t>(shape[1]) == 5;
            const std::string where = row_of_five ? "movements[" + std::to_string(i / 5) + ", " + std::to_string(i % 5) +
                                                        "] (" + columns[i % 5] + ")"
                                                  : "a movement entry";
            if (item < zero) {
                raise(PyExc_ValueError, where + " is negative: " + text(item));
            }
            if (item >= limit) {
                raise(PyExc_ValueError, where + " = " + text(item) +
                                            " does not fit in 64 bits (movements are integers in [0, 2**64))");
            }
        }
        return "u";
    }

    bool read(nb::handle object) {
        if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
            PyErr_Clear();
            return false;
        }
        has_view_ = true;
        const char* format = view_.format == nullptr ? "B" : view_.format;
        if (*format == '@' || *format == '=' || *format == '<') {
            format++;  // native or little-endian (the only byte order mtsarray builds for)
        }
        const bool is_integer64 = view_.itemsize == 8 && format[0] != '\0' && format[1] == '\0' &&
                                  std::strchr("lqLQnN", format[0]) != nullptr;
        if (view_.ndim != 2 || view_.shape[1] != 5 || !is_integer64) {
            PyBuffer_Release(&view_);
            has_view_ = false;
            return false;
        }
        data_ = static_cast<const mts_data_movement_t*>(view_.buf);
        count_ = static_cast<uintptr_t>(view_.shape[0]);
        is_signed_ = std::strchr("lqn", format[0]) != nullptr;
        return true;
    }

    Py_buffer view_ = {};
    bool has_view_ = false;
    nb::object converted_;
    const mts_data_movement_t* data_ = nullptr;
    uintptr_t count_ = 0;
    bool is_signed_ = false;
};

}  // namespace

// ---- making and releasing --------------------------------------------------

Array Array::adopt(mts_array_t raw) noexcept {
    Array array;
    array.raw_ = raw;
    array.owned_ = true;
    return array;
}

Array Array::borrow(const mts_array_t& raw, nb::object owner) {
    bool ours = false;
    check(mtsarray_is_mtsarray(&raw, &ours));
    if (!ours) {
        raise_error("this mts_array_t was not made by mtsarray (or was already destroyed)");
    }
    Array array;
    array.raw_ = raw;
    array.owned_ = false;
    array.owner_ = std::move(owner);
    return array;
}

Array::Array(Array&& other) noexcept
    : raw_(other.raw_),
      owned_(other.owned_),
      owner_(std::move(other.owner_)),
      stream_object_(std::move(other.stream_object_)) {
    other.raw_ = {};
    other.owned_ = false;
}

Array::~Array() {
    if (!owned_ || raw_.destroy == nullptr) {
        return;
    }
    if (stream_object_.is_valid()) {
        // The stream came as a Python object, kept alive as long as this
        // array. The memory may outlive both (DLPack exports): its free is
        // moved to the device's default stream (which first waits for the
        // stream's work), so that nothing is ever queued on a stream whose
        // object is gone. Failures only leave the free where it was.
        DLDevice device = {};
        if (raw_.device(raw_.ptr, &device) == MTS_SUCCESS) {
            (void)mtsarray_set_stream(&raw_, default_stream_number(device.device_type));
        }
    }
    raw_.destroy(raw_.ptr);
}

void Array::check_metadata_writable(const char* operation) const {
    if (!owned_) {
        raise(PyExc_ValueError, std::string("can not ") + operation +
                                    " a view of an array that metatensor owns (the values of a TensorBlock "
                                    "or Labels): copy() it first");
    }
    if (busy_ != 0) {
        raise(PyExc_RuntimeError, std::string("can not ") + operation +
                                      " this array while another thread is using it");
    }
}

// ---- metadata --------------------------------------------------------------

nb::tuple Array::shape() const {
    const uintptr_t* shape = nullptr;
    uintptr_t count = 0;
    check(raw_.shape(raw_.ptr, &shape, &count));
    return shape_tuple(shape, count);
}

size_t Array::ndim() const {
    const uintptr_t* shape = nullptr;
    uintptr_t count = 0;
    check(raw_.shape(raw_.ptr, &shape, &count));
    return count;
}

DLDataType Array::dl_dtype() const {
    DLDataType dtype = {};
    check(raw_.dtype(raw_.ptr, &dtype));
    return dtype;
}

nb::object Array::dtype() const {
    return dtype_object(dl_dtype());
}

DLDevice Array::dl_device() const {
    DLDevice device = {};
    check(raw_.device(raw_.ptr, &device));
    return device;
}

std::string Array::device() const {
    return device_name(dl_device());
}

int64_t Array::stream() const {
    int64_t stream = 0;
    check(mtsarray_get_stream(&raw_, &stream));
    return stream;
}

void Array::set_stream(nb::handle stream) {
    check_metadata_writable("change the stream of");
    const int64_t number = stream_number(stream, dl_device().device_type);
    set_stream(number, is_stream_object(stream) ? nb::borrow(stream) : nb::object());
}

void Array::set_stream(int64_t number, nb::object stream_object) {
    check_metadata_writable("change the stream of");
    if (number != stream()) {
        check(mtsarray_set_stream(&raw_, number));
    }
    stream_object_ = std::move(stream_object);
}

mts_array_t Array::release() noexcept {
    const mts_array_t raw = raw_;
    raw_ = {};
    owned_ = false;
    stream_object_ = nb::object();
    return raw;
}

uintptr_t Array::data_pointer() const {
    void* data = nullptr;
    check(mtsarray_data(&raw_, &data));
    return reinterpret_cast<uintptr_t>(data);
}

std::string Array::repr() const {
    return "MtsArray(shape=" + nb::cast<std::string>(nb::repr(shape())) + ", dtype=" +
           text(dtype()) + ", device='" + device() + "', stream=" +
           std::to_string(stream()) + ")";
}

// ---- operations ------------------------------------------------------------

void Array::synchronize() const {
    mts_status_t status;
    {
        Busy busy(*this);
        nb::gil_scoped_release release;
        status = mtsarray_synchronize(&raw_);
    }
    check(status);
}

Array Array::copy(nb::handle device) const {
    const DLDevice target = device.is_none() ? dl_device() : parse_device(device);
    mts_array_t copied = {};
    mts_status_t status;
    {
        Busy busy(*this);
        nb::gil_scoped_release release;
        status = raw_.copy(raw_.ptr, target, &copied);
    }
    check(status);
    return adopt(copied);
}

void Array::move_data(const Array& input, nb::handle movements) {
    Movements moves(movements);
    mts_status_t status;
    {
        Busy output_busy(*this);
        Busy input_busy(input);
        nb::gil_scoped_release release;
        status = raw_.move_data(raw_.ptr, input.raw_.ptr, moves.data(), moves.count());
    }
    if (status != MTS_SUCCESS) {
        moves.raise_if_negative();
        raise_last_error();
    }
}

mtsarray_move_plan_t* Array::create_move_plan(const Array& input, nb::handle movements) const {
    Movements moves(movements);
    mtsarray_move_plan_t* plan = nullptr;
    mts_status_t status;
    {
        Busy output_busy(*this);
        Busy input_busy(input);
        nb::gil_scoped_release release;
        status = mtsarray_move_plan_create(&raw_, &input.raw_, moves.data(), moves.count(), &plan);
    }
    if (status != MTS_SUCCESS) {
        moves.raise_if_negative();
        raise_last_error();
    }
    return plan;
}

void Array::execute_move_plan(const mtsarray_move_plan_t* plan, const Array& input) {
    mts_status_t status;
    {
        Busy output_busy(*this);
        Busy input_busy(input);
        nb::gil_scoped_release release;
        status = mtsarray_move_plan_execute(plan, &raw_, &input.raw_);
    }
    check(status);
}

double Array::time_move_data(const Array& input, nb::handle movements, int64_t iterations) {
    Movements moves(movements);
    if (iterations < 1) {
        raise(PyExc_ValueError, "iterations must be at least 1");
    }
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; i++) {
        check(raw_.move_data(raw_.ptr, input.raw_.ptr, moves.data(), moves.count()));
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / static_cast<double>(iterations);
}

void Array::reshape(nb::handle shape) {
    check_metadata_writable("reshape");
    auto dimensions = parse_shape(shape, /*allow_infer=*/true);
    for (auto& dimension : dimensions) {
        if (dimension != SIZE_MAX) {
            continue;
        }
        // the one -1: what the other dimensions leave of the array's size
        const uintptr_t* current = nullptr;
        uintptr_t count = 0;
        check(raw_.shape(raw_.ptr, &current, &count));
        uintptr_t size = 1, others = 1;
        for (uintptr_t axis = 0; axis < count; axis++) {
            size *= current[axis];
        }
        for (auto other : dimensions) {
            others *= other == SIZE_MAX ? 1 : other;
        }
        if (others == 0 || size % others != 0) {
            raise(PyExc_ValueError, "can not reshape an array of " + std::to_string(size) + " elements to " +
                                        nb::cast<std::string>(nb::repr(shape)));
        }
        dimension = size / others;
    }
    check(raw_.reshape(raw_.ptr, dimensions.data(), dimensions.size()));
}

void Array::swap_axes(int64_t axis_1, int64_t axis_2) {
    check_metadata_writable("swap the axes of");
    const auto dimensions = static_cast<int64_t>(ndim());
    for (int64_t* axis : {&axis_1, &axis_2}) {
        if (*axis < 0) {
            *axis += dimensions;
        }
        if (*axis < 0) {
            raise(PyExc_ValueError, "swap_axes: axis " + std::to_string(*axis - dimensions) +
                                        " is out of range for an array with " + std::to_string(dimensions) +
                                        " dimensions");
        }
    }
    check(raw_.swap_axes(raw_.ptr, static_cast<uintptr_t>(axis_1), static_cast<uintptr_t>(axis_2)));
}

// ---- DLPack ------------------------------------------------------------------

nb::object Array::dlpack(nb::handle stream, nb::handle max_version, nb::handle dl_device,
                         nb::handle copy) const {
    // max_version: None or below 1 -> the pre-1.0 capsule
    bool versioned = false;
    if (!max_version.is_none()) {
        if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2) {
            raise(PyExc_TypeError, "max_version must be a (major, minor) tuple, got " +
                                       nb::cast<std::string>(nb::repr(max_version)));
        }
        const long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version.ptr(), 0));
        if (major == -1 && PyErr_Occurred()) {
            throw nb::python_error();
        }
        versioned = major >= 1;
    }
    // copy: None (copy only when needed), True (always), False (never)
    if (!copy.is_none() && !PyBool_Check(copy.ptr())) {
        raise(PyExc_TypeError, "copy must be None, True or False, got " + nb::cast<std::string>(nb::repr(copy)));
    }
    const bool must_copy = copy.ptr() == Py_True;
    const bool may_not_copy = copy.ptr() == Py_False;
    // stream: None (the consumer uses the device's default stream) or a number
    int64_t stream_value = 0;
    const int64_t* stream_pointer = nullptr;
    if (!stream.is_none()) {
        if (!PyLong_Check(stream.ptr()) || PyBool_Check(stream.ptr())) {
            raise(PyExc_TypeError, "stream must be None or a DLPack stream number (int), got " +
                                       nb::cast<std::string>(nb::repr(stream)));
        }
        stream_value = PyLong_AsLongLong(stream.ptr());
        if (stream_value == -1 && PyErr_Occurred()) {
            throw nb::python_error();
        }
        stream_pointer = &stream_value;
    }

    const DLDevice own = this->dl_device();
    const DLDevice target = dl_device.is_none() ? own : parse_device(dl_device);
    if (may_not_copy && !same_device(own, target)) {
        raise(PyExc_BufferError, "copy=False, but exporting this " + device_name(own) + " array to " +
                                     device_name(target) + " needs a copy");
    }

    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    DLManagedTensorVersioned* tensor = nullptr;
    mts_status_t status;
    // only a host consumer of device data waits, and only then is the GIL released
    const bool may_wait = must_copy || (is_host_accessible(target.device_type) && !is_host_accessible(own.device_type));
    const auto do_export = [&]() {
        if (!must_copy) {
            return raw_.as_dlpack(raw_.ptr, &tensor, target, stream_pointer, version);
        }
        mts_array_t copied = {};
        mts_status_t result = raw_.copy(raw_.ptr, target, &copied);
        if (result != MTS_SUCCESS) {
            return result;
        }
        result = copied.as_dlpack(copied.ptr, &tensor, target, stream_pointer, version);
        copied.destroy(copied.ptr);  // the export keeps the copy's memory
        if (result == MTS_SUCCESS) {
            tensor->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
        }
        return result;
    };
    if (may_wait) {
        Busy busy(*this);
        nb::gil_scoped_release release;
        status = do_export();
    } else {
        status = do_export();
    }
    check(status);
    return export_capsule(tensor, versioned);
}

nb::tuple Array::dlpack_device() const {
    const DLDevice device = dl_device();
    return nb::make_tuple(device.device_type, device.device_id);
}

// ---- from_dlpack --------------------------------------------------------------

namespace {

/// Memory the host computes on synchronously (the CPU, pinned memory): it
/// has no streams, and DLPack asks its producers for stream=None.
bool has_no_streams(DLDeviceType type) {
    return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost;
}

/// The stream the caller of from_dlpack asks for, resolved once for the
/// producer's device into the one value every path uses: the number the
/// producer orders its pending work before, and the stream the new array
/// then works on.
///
/// The rule: `None` is the device's default stream (CUDA 1, ROCm 0); a
/// stream object is its handle (the default stream's handle 0 is CUDA 1,
/// ROCm 0), kept alive by the array; host memory has no streams, so a host
/// producer is asked without one and only `None` and -1 are valid, checked
/// before the producer is asked anything (NumPy >= 2.3 refuses every stream
/// but None, with an error of its own). Other numbers are the library's to
/// judge, when the array takes the stream.
class ConsumerStream {
public:
    ConsumerStream(nb::handle stream, DLDevice device)
        : device_(device), given_(!stream.is_none()), number_(stream_number(stream, device.device_type)) {
        if (is_stream_object(stream)) {
            stream_object_ = nb::borrow(stream);
        }
        if (given_ && has_no_streams(device.device_type) && number_ != default_stream_number(kDLCPU)) {
            const std::string type = device_name(DLDevice{device.device_type, 0});
            const std::string where = device.device_type == kDLCPU ? type : type + ":" + std::to_string(device.device_id);
            raise_error("from_dlpack: invalid DLPack stream number " + std::to_string(number_) + " for " + where +
                        ": " + type + " memory has no streams, only -1 (or NULL) is valid");
        }
    }

    int64_t number() const { return number_; }

    /// The `stream` of the producer's `__dlpack__`, or a null object to
    /// leave it out: host memory is asked without one, and a GPU producer
    /// is named its default stream rather than left to guess (recent
    /// PyTorch reads a missing stream as "no synchronisation" where the
    /// standard says "default").
    nb::object for_producer() const {
        const DLDeviceType type = device_.device_type;
        if (has_no_streams(type) || (!given_ && type != kDLCUDA && type != kDLROCM)) {
            return nb::object();
        }
        return nb::int_(number_);
    }

    /// The new array works on this stream from now on (after its pending
    /// work) and keeps a stream object alive; nothing to do when the caller
    /// named no stream.
    void apply(Array& array) const {
        if (given_) {
            array.set_stream(number_, stream_object_);
        }
    }

private:
    DLDevice device_;
    bool given_;
    int64_t number_;
    nb::object stream_object_;
};

/// A ConsumerStream for the device of `tensor`, which is released (the
/// caller owned it) when the stream is not valid there.
ConsumerStream resolve_for(nb::handle stream, DLManagedTensorVersioned* tensor) {
    try {
        return ConsumerStream(stream, tensor->dl_tensor.device);
    } catch (...) {
        if (tensor->deleter != nullptr) {
            tensor->deleter(tensor);
        }
        throw;
    }
}

/// The producer's `__dlpack_device__()` as a DLDevice (whose device type is
/// an enum and whose id an int32), or nothing for a producer older than
/// the method. Raises TypeError / ValueError naming what it returned.
std::optional<DLDevice> producer_device(nb::handle producer) {
    if (!nb::hasattr(producer, "__dlpack_device__")) {
        return std::nullopt;
    }
    nb::object device = producer.attr("__dlpack_device__")();
    const auto returned = [&]() {
        return "from_dlpack: the producer's __dlpack_device__() returned " + nb::cast<std::string>(nb::repr(device));
    };
    const auto is_integer = [](nb::handle value) {
        return PyIndex_Check(value.ptr()) && !PyBool_Check(value.ptr()) && !PyFloat_Check(value.ptr());
    };
    if (!PyTuple_Check(device.ptr()) || PyTuple_GET_SIZE(device.ptr()) != 2 || !is_integer(device[0]) ||
        !is_integer(device[1])) {
        raise(PyExc_TypeError, returned() + ", not a (device_type, device_id) pair of integers");
    }
    long long values[2] = {};
    for (size_t i = 0; i < 2; i++) {
        int overflow = 0;
        nb::object index = nb::steal(PyNumber_Index(device[i].ptr()));
        if (!index.is_valid()) {
            throw nb::python_error();
        }
        values[i] = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
        if (values[i] == -1 && PyErr_Occurred()) {
            throw nb::python_error();
        }
        if (overflow != 0 || values[i] < 0 || values[i] > INT32_MAX) {
            raise(PyExc_ValueError, returned() + ": the device " + (i == 0 ? "type" : "id") +
                                        " is out of range (0 to 2**31 - 1)");
        }
    }
    return DLDevice{static_cast<DLDeviceType>(values[0]), static_cast<int32_t>(values[1])};
}

/// mtsarray_from_dlpack on a tensor the caller owns (ownership passes, also
/// on error), then the caller's stream. The GIL is released when the
/// import may copy.
Array import_tensor(DLManagedTensorVersioned* tensor, const ConsumerStream& requested) {
    mts_array_t raw = {};
    mts_status_t status;
    if (imports_without_copy(tensor)) {
        status = mtsarray_from_dlpack(tensor, &raw);
    } else {
        nb::gil_scoped_release release;
        status = mtsarray_from_dlpack(tensor, &raw);
    }
    check(status);
    Array array = Array::adopt(raw);
    requested.apply(array);
    return array;
}

/// Through the producer's DLPack C exchange API (PyTorch publishes one): no
/// Python call, the cheap path for the hand-offs of a training loop. The
/// producer does not order anything here, so this path orders it itself,
/// exactly as `__dlpack__(stream=...)` would have: the new array first works
/// on the producer's current work stream, then moves to the requested one
/// (which waits for it with an event; the host does not block). Returns
/// nothing, having taken nothing, when the protocol path must run instead.
std::optional<Array> import_through_exchange_api(nb::handle object, nb::handle stream,
                                                 const DLPackExchangeAPI* api) {
    // PyTorch's own rule (its __dlpack__ refuses such tensors, with its message)
    PyObject* requires_grad = PyObject_GetAttrString(object.ptr(), "requires_grad");
    if (requires_grad == nullptr) {
        PyErr_Clear();
    } else {
        const int truth = PyObject_IsTrue(requires_grad);
        Py_DECREF(requires_grad);
        if (truth != 0) {
            PyErr_Clear();
            return std::nullopt;
        }
    }
    DLManagedTensorVersioned* tensor = nullptr;
    if (api->managed_tensor_from_py_object_no_sync(object.ptr(), &tensor) != 0 || tensor == nullptr) {
        // the producer can not describe it: its __dlpack__ says why
        PyErr_Clear();
        return std::nullopt;
    }
    const auto release = [&]() {
        if (tensor->deleter != nullptr) {
            tensor->deleter(tensor);
        }
    };
    const DLDevice device = tensor->dl_tensor.device;
    const bool on_gpu = device.device_type == kDLCUDA || device.device_type == kDLROCM;
    // a copy on import (strided, read-only data) would be queued before the
    // producer's work is ordered; complex data may carry PyTorch's conj bit
    if (tensor->version.major != DLPACK_MAJOR_VERSION || tensor->dl_tensor.dtype.code == kDLComplex ||
        (on_gpu && !imports_without_copy(tensor))) {
        release();
        return std::nullopt;
    }
    int64_t producer_stream = default_stream_number(device.device_type);
    if (on_gpu) {
        void* current = nullptr;
        if (api->current_work_stream(device.device_type, device.device_id, &current) != 0) {
            release();
            throw nb::python_error();
        }
        // NULL is the default stream; CUDA's special handles 1 (legacy) and 2
        // (per-thread) are also their DLPack numbers
        if (current != nullptr) {
            producer_stream = static_cast<int64_t>(reinterpret_cast<intptr_t>(current));
        }
    }
    const ConsumerStream requested = resolve_for(stream, tensor);
    if (!on_gpu) {
        return import_tensor(tensor, requested);
    }
    mts_array_t raw = {};
    check(mtsarray_from_dlpack(tensor, &raw));  // no copy: returns at once
    Array array = Array::adopt(raw);
    // the producer's stream first, then the requested one, which waits for it
    array.set_stream(producer_stream, nb::object());
    if (requested.number() != producer_stream) {
        array.set_stream(requested.number(), nb::object());
    }
    requested.apply(array);  // keeps a stream object alive
    return array;
}

}  // namespace

Array from_dlpack(nb::handle object, nb::handle stream) {
    if (PyCapsule_CheckExact(object.ptr())) {
        // the device is known once the capsule is taken
        DLManagedTensorVersioned* tensor = consume_capsule(object);
        return import_tensor(tensor, resolve_for(stream, tensor));
    }
    // another framework's table (PyTorch's); an MtsArray's own goes through
    // __dlpack__ below, which honours `stream` for the new array directly
    const DLPackExchangeAPI* api = nb::isinstance<Array>(object) ? nullptr : exchange_api(Py_TYPE(object.ptr()));
    if (api != nullptr) {
        if (std::optional<Array> array = import_through_exchange_api(object, stream, api)) {
            return std::move(*array);
        }
    }
    const std::optional<DLDevice> device = producer_device(object);
    if (!device.has_value() && is_stream_object(stream) && nb::hasattr(object, "__dlpack__")) {
        raise(PyExc_TypeError, "from_dlpack: this producer has no __dlpack_device__, and a stream object's "
                               "default stream depends on the device: pass a DLPack stream number");
    }
    if (device.has_value()) {
        const ConsumerStream requested(stream, *device);
        nb::object number = requested.for_producer();
        DLManagedTensorVersioned* tensor = consume_capsule(request_capsule(object, number.ptr()));
        return import_tensor(tensor, requested);
    }
    // a producer older than __dlpack_device__: the number goes to it as given,
    // and is resolved for the device its tensor is on
    DLManagedTensorVersioned* tensor = consume_capsule(request_capsule(object, stream.is_none() ? nullptr : stream.ptr()));
    return import_tensor(tensor, resolve_for(stream, tensor));
}

void Array::copy_from(nb::handle source) {
    auto copy = [this](const Array& from) {
        mts_status_t status;
        {
            Busy output_busy(*this);
            Busy input_busy(from);
            nb::gil_scoped_release release;
            status = mtsarray_copy_into(&raw_, &from.raw_);
        }
        check(status);
    };
    if (nb::isinstance<Array>(source)) {
        copy(nb::cast<const Array&>(source));
        return;
    }
    if (!PyCapsule_CheckExact(source.ptr()) && !nb::hasattr(source, "__dlpack__")) {
        raise(PyExc_TypeError, "copy_from: expected an MtsArray or an object speaking DLPack (NumPy, PyTorch, "
                               "CuPy, ...), got " + nb::cast<std::string>(nb::str(source.type().attr("__name__"))));
    }
    // the producer's tensor, its work ordered before the device's default
    // stream (as from_dlpack(source) asks)
    DLManagedTensorVersioned* tensor = nullptr;
    if (PyCapsule_CheckExact(source.ptr())) {
        tensor = consume_capsule(source);
    } else if (const std::optional<DLDevice> device = producer_device(source)) {
        const nb::object number = ConsumerStream(nb::none(), *device).for_producer();
        tensor = consume_capsule(request_capsule(source, number.ptr()));
    } else {
        tensor = consume_capsule(request_capsule(source, nullptr));
    }
    if (imports_without_copy(tensor)) {
        // a zero-copy view of the producer's data, copied from there (a
        // captured copy reads it at every replay)
        copy(import_tensor(tensor, resolve_for(nb::none(), tensor)));
        return;
    }
    // an export mtsarray must copy first (strided, read-only): handed to
    // mtsarray_copy_into as the producer's array, which makes that copy, or
    // refuses during a capture (a replay would upload the copy again)
    ForeignTensor foreign(tensor);
    const mts_array_t raw_source = foreign.array();
    mts_status_t status;
    {
        Busy output_busy(*this);
        nb::gil_scoped_release release;
        status = mtsarray_copy_into(&raw_, &raw_source);
    }
    check(status);
}

Array& array_argument(nb::handle object, const char* call, const char* name) {
    Array* array = nullptr;
    if (nb::try_cast<Array*>(object, array) && array != nullptr) {
        return *array;
    }
    // the type as Python code names it: numpy.ndarray, torch.Tensor, int
    auto type = object.type();
    std::string module = nb::cast<std::string>(nb::str(type.attr("__module__")));
    std::string type_name = nb::cast<std::string>(nb::str(type.attr("__qualname__")));
    if (module != "builtins") {
        type_name = module + "." + type_name;
    }
    std::string message = std::string(call) + ": " + name + " must be an mtsarray.MtsArray, not " + type_name;
    if (!object.is_none()) {
        message += std::string(": wrap it with mtsarray.from_dlpack(") + name +
                   ") first (zero-copy for a C-contiguous, writable array, or anything with __dlpack__)";
    }
    throw nb::type_error(message.c_str());
}

}  // namespace mtsarray_python
