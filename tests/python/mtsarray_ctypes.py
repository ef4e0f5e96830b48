"""A small ctypes binding of libmtsarray, for the Python interoperability tests.

No compiled extension: the DLPack structs (as vendored by metatensor in
``metatensor/dlpack/dlpack.h``, DLPack 1.x) and ``mts_array_t`` are declared
here with ctypes, and ``MtsArray`` speaks the Python DLPack protocol
(``__dlpack__`` / ``__dlpack_device__``) so that ``numpy.from_dlpack``,
``torch.from_dlpack`` and ``cupy.from_dlpack`` read mtsarray data zero-copy.

Finding the library: ``$MTSARRAY_LIBRARY`` (the path of libmtsarray.so, set by
ctest), else the system search path. When the ``metatensor`` Python package
is importable its own libmetatensor is loaded first, so that libmtsarray
binds to that very copy (same soname) and both share one data-origin
registry and one last-error slot.
"""

import ctypes
import ctypes.util
import os
import sys


# ---- DLPack (metatensor/dlpack/dlpack.h) -----------------------------------

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLROCM = 10
kDLROCMHost = 11
kDLCUDAManaged = 13

kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBool = 6

DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

DLPACK_MAJOR_VERSION = 1

FLOAT64 = DLDataType(kDLFloat, 64, 1)
FLOAT32 = DLDataType(kDLFloat, 32, 1)
INT32 = DLDataType(kDLInt, 32, 1)
INT64 = DLDataType(kDLInt, 64, 1)

CPU = DLDevice(kDLCPU, 0)


# ---- metatensor.h ----------------------------------------------------------

mts_status_t = ctypes.c_int32
mts_data_origin_t = ctypes.c_uint64
MTS_SUCCESS = 0


class mts_data_movement_t(ctypes.Structure):
    _fields_ = [
        ("sample_in", ctypes.c_size_t),
        ("sample_out", ctypes.c_size_t),
        ("properties_start_in", ctypes.c_size_t),
        ("properties_start_out", ctypes.c_size_t),
        ("properties_length", ctypes.c_size_t),
    ]


class mts_array_t(ctypes.Structure):
    pass


_CB = ctypes.CFUNCTYPE
_p = ctypes.c_void_p
mts_array_t._fields_ = [
    ("ptr", _p),
    ("destroy", _CB(None, _p)),
    ("origin", _CB(mts_status_t, _p, ctypes.POINTER(mts_data_origin_t))),
    ("device", _CB(mts_status_t, _p, ctypes.POINTER(DLDevice))),
    ("dtype", _CB(mts_status_t, _p, ctypes.POINTER(DLDataType))),
    ("as_dlpack", _CB(mts_status_t, _p, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
                      DLDevice, ctypes.POINTER(ctypes.c_int64), DLPackVersion)),
    ("from_dlpack", _CB(mts_status_t, _p, ctypes.POINTER(DLManagedTensorVersioned),
                        ctypes.POINTER(mts_array_t))),
    ("shape", _CB(mts_status_t, _p, ctypes.POINTER(ctypes.POINTER(ctypes.c_size_t)),
                  ctypes.POINTER(ctypes.c_size_t))),
    ("reshape", _CB(mts_status_t, _p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t)),
    ("swap_axes", _CB(mts_status_t, _p, ctypes.c_size_t, ctypes.c_size_t)),
    ("create", _CB(mts_status_t, _p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                   mts_array_t, ctypes.POINTER(mts_array_t))),
    ("copy", _CB(mts_status_t, _p, DLDevice, ctypes.POINTER(mts_array_t))),
    ("move_data", _CB(mts_status_t, _p, _p, ctypes.POINTER(mts_data_movement_t), ctypes.c_size_t)),
]


# ---- loading the libraries -------------------------------------------------

def _load_metatensor():
    """libmetatensor: the metatensor Python package's own copy when it is
    importable (loaded before libmtsarray, so the soname resolves to it)."""
    try:
        from metatensor._c_lib import _get_library, _lib_path
    except ImportError:
        return None
    _get_library()
    return ctypes.CDLL(_lib_path())


def _load_mtsarray():
    path = os.environ.get("MTSARRAY_LIBRARY") or ctypes.util.find_library("mtsarray")
    if not path:
        raise ImportError("libmtsarray not found: set MTSARRAY_LIBRARY to the path of libmtsarray.so")
    return ctypes.CDLL(path)


metatensor_lib = _load_metatensor()
lib = _load_mtsarray()
# without the Python package, the mts_* symbols come through libmtsarray's dependency
_mts = metatensor_lib if metatensor_lib is not None else lib

_shape_p = ctypes.POINTER(ctypes.c_size_t)
_array_p = ctypes.POINTER(mts_array_t)
for _name, _args in {
    "mtsarray_zeros": [DLDevice, DLDataType, _shape_p, ctypes.c_size_t, _array_p],
    "mtsarray_full": [DLDevice, DLDataType, _shape_p, ctypes.c_size_t, ctypes.c_void_p, _array_p],
    "mtsarray_wrap": [ctypes.c_void_p, DLDevice, DLDataType, _shape_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_void_p, _array_p],
    "mtsarray_from_dlpack": [ctypes.POINTER(DLManagedTensorVersioned), _array_p],
    "mtsarray_set_stream": [_array_p, ctypes.c_int64],
    "mtsarray_get_stream": [_array_p, ctypes.POINTER(ctypes.c_int64)],
    "mtsarray_synchronize": [_array_p],
    "mtsarray_data": [_array_p, ctypes.POINTER(ctypes.c_void_p)],
    "mtsarray_is_mtsarray": [_array_p, ctypes.POINTER(ctypes.c_bool)],
    "mtsarray_backend_available": [ctypes.c_int, ctypes.POINTER(ctypes.c_bool)],
    "mtsarray_tensormap_to": [ctypes.c_void_p, DLDevice, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)],
}.items():
    _function = getattr(lib, _name)
    _function.argtypes = _args
    _function.restype = mts_status_t
lib.mtsarray_backend_unavailable_reason.argtypes = [ctypes.c_int]
lib.mtsarray_backend_unavailable_reason.restype = ctypes.c_char_p
lib.mtsarray_version.argtypes = []
lib.mtsarray_version.restype = ctypes.c_char_p

_mts.mts_last_error.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                ctypes.POINTER(ctypes.c_void_p)]
_mts.mts_last_error.restype = mts_status_t
_mts.mts_get_data_origin.argtypes = [mts_data_origin_t, ctypes.c_char_p, ctypes.c_size_t]
_mts.mts_get_data_origin.restype = mts_status_t


class MtsArrayError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"status {status}: {message}")
        self.status = status
        self.message = message


def last_error():
    message = ctypes.c_char_p()
    _mts.mts_last_error(ctypes.byref(message), None, None)
    return (message.value or b"").decode("utf8", "replace")


def check(status):
    if status != MTS_SUCCESS:
        raise MtsArrayError(status, last_error())


def version():
    return lib.mtsarray_version().decode()


def backend_available(device_type):
    available = ctypes.c_bool(False)
    check(lib.mtsarray_backend_available(device_type, ctypes.byref(available)))
    return available.value, lib.mtsarray_backend_unavailable_reason(device_type).decode()


def loaded_libraries(name):
    """Distinct files mapped into this process whose name contains `name`."""
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if name in line.split()[-1]})


# ---- PyCapsule plumbing (the Python DLPack protocol) -----------------------

DLTENSOR_VERSIONED = b"dltensor_versioned"
USED_DLTENSOR_VERSIONED = b"used_dltensor_versioned"
DLTENSOR = b"dltensor"

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyMem_RawMalloc.restype = ctypes.c_void_p
_api.PyMem_RawMalloc.argtypes = [ctypes.c_size_t]
_api.PyMem_RawFree.restype = None
_api.PyMem_RawFree.argtypes = [ctypes.c_void_p]

# The capsule destructor gets the capsule with a zero reference count: it must
# take a raw pointer (a py_object argument would resurrect and re-free it), so
# the capsule functions are re-bound with void* arguments for it.
_capsule_is_valid_raw = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ctypes.cast(_api.PyCapsule_IsValid, ctypes.c_void_p).value)
_capsule_get_pointer_raw = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ctypes.cast(_api.PyCapsule_GetPointer, ctypes.c_void_p).value)


def _release_unconsumed(capsule, name, pointer_type, _is_finalizing=sys.is_finalizing):
    # a consumer renamed the capsule (used_...): the tensor is its to release
    if _is_finalizing() or not _capsule_is_valid_raw(capsule, name):
        return
    tensor = ctypes.cast(_capsule_get_pointer_raw(capsule, name), pointer_type)
    if tensor and tensor.contents.deleter:
        tensor.contents.deleter(tensor)


# The C callbacks must outlive every capsule, so they live at module level
# for the whole process.
_VERSIONED_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
    lambda capsule: _release_unconsumed(capsule, DLTENSOR_VERSIONED,
                                        ctypes.POINTER(DLManagedTensorVersioned)))
_LEGACY_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
    lambda capsule: _release_unconsumed(capsule, DLTENSOR, ctypes.POINTER(DLManagedTensor)))


def _legacy_deleter(legacy, _is_finalizing=sys.is_finalizing):
    # the legacy wrapper's manager_ctx is the versioned tensor it forwards to
    versioned = ctypes.cast(legacy.contents.manager_ctx, ctypes.POINTER(DLManagedTensorVersioned))
    if versioned and versioned.contents.deleter:
        versioned.contents.deleter(versioned)
    _api.PyMem_RawFree(ctypes.cast(legacy, ctypes.c_void_p))


_LEGACY_DELETER = DLManagedTensor._fields_[2][1](_legacy_deleter)


def versioned_capsule(tensor):
    """A "dltensor_versioned" PyCapsule owning `tensor` until a consumer takes it."""
    return _api.PyCapsule_New(ctypes.cast(tensor, ctypes.c_void_p), DLTENSOR_VERSIONED,
                              ctypes.cast(_VERSIONED_CAPSULE_DESTRUCTOR, ctypes.c_void_p))


def legacy_capsule(tensor):
    """A pre-1.0 "dltensor" PyCapsule (for consumers without max_version)
    forwarding to the versioned `tensor`. Read-only exports are refused, as
    the legacy struct can not say so."""
    if tensor.contents.flags & DLPACK_FLAG_BITMASK_READ_ONLY:
        tensor.contents.deleter(tensor)
        raise BufferError("a read-only tensor can not be exported with DLPack < 1.0")
    memory = _api.PyMem_RawMalloc(ctypes.sizeof(DLManagedTensor))
    if not memory:
        tensor.contents.deleter(tensor)
        raise MemoryError("could not allocate a DLManagedTensor")
    legacy = ctypes.cast(memory, ctypes.POINTER(DLManagedTensor))
    ctypes.memmove(memory, ctypes.addressof(tensor.contents.dl_tensor), ctypes.sizeof(DLTensor))
    legacy.contents.manager_ctx = ctypes.cast(tensor, ctypes.c_void_p)
    legacy.contents.deleter = _LEGACY_DELETER
    return _api.PyCapsule_New(memory, DLTENSOR, ctypes.cast(_LEGACY_CAPSULE_DESTRUCTOR, ctypes.c_void_p))


def _versioned_wrapper_deleter(versioned, _is_finalizing=sys.is_finalizing):
    # the versioned wrapper's manager_ctx is the legacy tensor it forwards to
    legacy = ctypes.cast(versioned.contents.manager_ctx, ctypes.POINTER(DLManagedTensor))
    if legacy and legacy.contents.deleter:
        legacy.contents.deleter(legacy)
    _api.PyMem_RawFree(ctypes.cast(versioned, ctypes.c_void_p))


_VERSIONED_WRAPPER_DELETER = DLManagedTensorVersioned._fields_[2][1](_versioned_wrapper_deleter)


def consume_legacy_capsule(capsule):
    """Take the DLManagedTensor out of a pre-1.0 "dltensor" capsule (renamed
    "used_dltensor") and wrap it in a DLManagedTensorVersioned 1.0 whose
    deleter releases the legacy tensor."""
    if not _api.PyCapsule_IsValid(capsule, DLTENSOR):
        raise ValueError("expected an unconsumed 'dltensor' capsule")
    pointer = _api.PyCapsule_GetPointer(capsule, DLTENSOR)
    if _api.PyCapsule_SetName(capsule, b"used_dltensor") != 0:
        raise RuntimeError("could not rename the DLPack capsule")
    legacy = ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor))
    memory = _api.PyMem_RawMalloc(ctypes.sizeof(DLManagedTensorVersioned))
    if not memory:
        legacy.contents.deleter(legacy)
        raise MemoryError("could not allocate a DLManagedTensorVersioned")
    ctypes.memset(memory, 0, ctypes.sizeof(DLManagedTensorVersioned))
    versioned = ctypes.cast(memory, ctypes.POINTER(DLManagedTensorVersioned))
    versioned.contents.version = DLPackVersion(1, 0)
    versioned.contents.manager_ctx = pointer
    versioned.contents.deleter = _VERSIONED_WRAPPER_DELETER
    versioned.contents.flags = 0
    ctypes.memmove(ctypes.addressof(versioned.contents.dl_tensor), pointer, ctypes.sizeof(DLTensor))
    return versioned


def consume_capsule(capsule):
    """Take the DLManagedTensorVersioned out of a "dltensor_versioned"
    capsule, renaming it "used_dltensor_versioned" as the DLPack protocol
    asks of a consumer: from here on, releasing the tensor is our job."""
    if not _api.PyCapsule_IsValid(capsule, DLTENSOR_VERSIONED):
        raise ValueError("expected an unconsumed 'dltensor_versioned' capsule")
    pointer = _api.PyCapsule_GetPointer(capsule, DLTENSOR_VERSIONED)
    if _api.PyCapsule_SetName(capsule, USED_DLTENSOR_VERSIONED) != 0:
        raise RuntimeError("could not rename the DLPack capsule")
    return ctypes.cast(pointer, ctypes.POINTER(DLManagedTensorVersioned))


# ---- arrays ----------------------------------------------------------------

def _shape_array(shape):
    shape = tuple(int(n) for n in shape)
    return (ctypes.c_size_t * max(len(shape), 1))(*shape), len(shape)


class MtsArray:
    """Owns one mtsarray `mts_array_t` and destroys it with `destroy()` (or
    when garbage-collected). `release()` hands the raw struct to a new owner
    (libmetatensor, for example)."""

    def __init__(self, raw):
        self.raw = raw

    # -- making arrays
    @staticmethod
    def zeros(shape, dtype=FLOAT64, device=CPU):
        raw = mts_array_t()
        dims, count = _shape_array(shape)
        check(lib.mtsarray_zeros(device, dtype, dims, count, ctypes.byref(raw)))
        return MtsArray(raw)

    @staticmethod
    def full(shape, value, dtype=FLOAT64, device=CPU):
        ctype = {(kDLFloat, 64): ctypes.c_double, (kDLFloat, 32): ctypes.c_float,
                 (kDLInt, 32): ctypes.c_int32, (kDLInt, 64): ctypes.c_int64}[(dtype.code, dtype.bits)]
        scalar = ctype(value)
        raw = mts_array_t()
        dims, count = _shape_array(shape)
        check(lib.mtsarray_full(device, dtype, dims, count, ctypes.byref(scalar), ctypes.byref(raw)))
        return MtsArray(raw)

    @staticmethod
    def from_dlpack_tensor(tensor):
        """mtsarray_from_dlpack: takes ownership of `tensor` (also on error)."""
        raw = mts_array_t()
        check(lib.mtsarray_from_dlpack(tensor, ctypes.byref(raw)))
        return MtsArray(raw)

    @staticmethod
    def from_dlpack(obj, stream=None):
        """Import any object speaking the Python DLPack protocol (NumPy,
        torch, cupy) through `__dlpack__(max_version=(1, 0))`."""
        kwargs = {} if stream is None else {"stream": stream}
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # a producer older than the 2023.12 array API
            capsule = obj.__dlpack__(**kwargs)
        if _api.PyCapsule_IsValid(capsule, DLTENSOR_VERSIONED):
            return MtsArray.from_dlpack_tensor(consume_capsule(capsule))
        return MtsArray.from_dlpack_tensor(consume_legacy_capsule(capsule))

    # -- queries
    def _call(self, name, *args):
        check(getattr(self.raw, name)(self.raw.ptr, *args))

    @property
    def shape(self):
        dims = ctypes.POINTER(ctypes.c_size_t)()
        count = ctypes.c_size_t()
        self._call("shape", ctypes.byref(dims), ctypes.byref(count))
        return tuple(dims[i] for i in range(count.value))

    @property
    def device(self):
        device = DLDevice()
        self._call("device", ctypes.byref(device))
        return device

    @property
    def dtype(self):
        dtype = DLDataType()
        self._call("dtype", ctypes.byref(dtype))
        return dtype

    @property
    def origin_name(self):
        origin = mts_data_origin_t()
        self._call("origin", ctypes.byref(origin))
        name = ctypes.create_string_buffer(256)
        check(_mts.mts_get_data_origin(origin.value, name, len(name)))
        return name.value.decode()

    @property
    def data_ptr(self):
        data = ctypes.c_void_p()
        check(lib.mtsarray_data(ctypes.byref(self.raw), ctypes.byref(data)))
        return data.value or 0

    @property
    def stream(self):
        stream = ctypes.c_int64()
        check(lib.mtsarray_get_stream(ctypes.byref(self.raw), ctypes.byref(stream)))
        return stream.value

    @stream.setter
    def stream(self, value):
        check(lib.mtsarray_set_stream(ctypes.byref(self.raw), value))

    def synchronize(self):
        check(lib.mtsarray_synchronize(ctypes.byref(self.raw)))

    def is_mtsarray(self):
        ours = ctypes.c_bool(False)
        check(lib.mtsarray_is_mtsarray(ctypes.byref(self.raw), ctypes.byref(ours)))
        return ours.value

    # -- operations
    def as_dlpack(self, device=None, stream=None, max_version=(1, 0)):
        """The raw DLManagedTensorVersioned* from the as_dlpack callback (the
        caller owns it). `stream` None is NULL (the device's default stream)."""
        tensor = ctypes.POINTER(DLManagedTensorVersioned)()
        stream_p = None if stream is None else ctypes.byref(ctypes.c_int64(stream))
        self._call("as_dlpack", ctypes.byref(tensor), self.device if device is None else device,
                   stream_p, DLPackVersion(*max_version))
        return tensor

    def move_data(self, source, movements):
        """self[m.sample_out, ..., m.properties_start_out + x] =
        source[m.sample_in, ..., m.properties_start_in + x] for every
        (sample_in, sample_out, start_in, start_out, length) in `movements`."""
        moves = (mts_data_movement_t * max(len(movements), 1))(
            *[mts_data_movement_t(*movement) for movement in movements])
        check(self.raw.move_data(self.raw.ptr, source.raw.ptr, moves, len(movements)))

    def copy(self, device=None):
        raw = mts_array_t()
        self._call("copy", self.device if device is None else device, ctypes.byref(raw))
        return MtsArray(raw)

    # -- the Python DLPack protocol (array API 2023.12)
    def __dlpack_device__(self):
        device = self.device
        return (device.device_type, device.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy is True:
            return self.copy(dl_device and DLDevice(*dl_device)).__dlpack__(
                stream=stream, max_version=max_version)
        device = self.device if dl_device is None else DLDevice(*dl_device)
        if copy is False and (device.device_type, device.device_id) != self.__dlpack_device__():
            raise BufferError("exporting to another device needs a copy, and copy=False")
        tensor = self.as_dlpack(device, stream)
        if max_version is None or max_version[0] < DLPACK_MAJOR_VERSION:
            return legacy_capsule(tensor)
        return versioned_capsule(tensor)

    # -- lifetime
    def release(self):
        """Give up ownership: returns the raw mts_array_t for a new owner."""
        raw, self.raw = self.raw, None
        return raw

    def destroy(self):
        if self.raw is not None and self.raw.destroy:
            self.raw.destroy(self.raw.ptr)
        self.raw = None

    def __del__(self):
        if getattr(self, "raw", None) is not None:
            self.destroy()
