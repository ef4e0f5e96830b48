#pragma once
// Python values <-> the C types of mtsarray.h: devices ("cpu", "cuda:1",
// (2, 1), torch.device), dtypes (NumPy dtype names and objects), stream
// numbers (ints, or torch / CuPy stream objects), shapes.

#include <cstdint>
#include <string>
#include <vector>

#include <metatensor.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

namespace mtsarray_python {

/// "cpu", "cuda", "cuda:N", "rocm", "rocm:N", "cuda_host", "cuda_managed[:N]",
/// "rocm_host"; a DLPack (device_type, device_id) pair; or an object with
/// `type` and `index` attributes (torch.device). Raises ValueError/TypeError.
DLDevice parse_device(nanobind::handle device);

/// The inverse of parse_device for the names it knows: "cpu", "cuda:0", ...
std::string device_name(DLDevice device);

/// A device type given as a name ("cuda"), a device ("cuda:1", whose index is
/// ignored) or a DLPack device type number.
DLDeviceType parse_device_type(nanobind::handle device_type);

/// Anything `numpy.dtype()` accepts ("float32", numpy.int64, a dtype) with a
/// DLPack equivalent: bool, (u)int8-64, float16-64, complex64/128.
DLDataType parse_dtype(nanobind::handle dtype);

/// The NumPy dtype of `dtype` (a cached numpy.dtype), or its DLPack name
/// ("bfloat16", "float8_e4m3fn") when NumPy has no such type.
nanobind::object dtype_object(DLDataType dtype);

/// The DLPack stream number of `stream` for arrays on `device_type`: an int
/// as it is, or the native handle of a stream object (torch.cuda.Stream's
/// `cuda_stream`, CuPy's `ptr`, `__cuda_stream__()`), where the handle 0
/// (the default stream) becomes 1 on CUDA and 0 on ROCm.
int64_t stream_number(nanobind::handle stream, DLDeviceType device_type);

/// True when `stream` is a stream object rather than a number.
bool is_stream_object(nanobind::handle stream);

/// The number of the device's default stream: CUDA 1, ROCm 0, host -1.
int64_t default_stream_number(DLDeviceType device_type);

/// A shape: one int or a sequence of ints, each >= 0 (`allow_infer`: one
/// entry may be -1, returned as SIZE_MAX, for reshape).
std::vector<uintptr_t> parse_shape(nanobind::handle shape, bool allow_infer = false);

/// The tuple of Python ints of a shape.
nanobind::tuple shape_tuple(const uintptr_t* shape, uintptr_t count);

/// str(value), as a C++ string.
std::string text(nanobind::handle value);

/// The `numpy` module (imported once).
nanobind::handle numpy();

}  // namespace mtsarray_python
