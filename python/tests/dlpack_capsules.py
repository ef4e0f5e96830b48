"""Hand-made DLPack capsules (ctypes), as a careless or hostile producer
makes them: any ndim, NULL or short shapes, huge dimensions and strides, any
dtype, device, version and flags. Used by the tests and by the capsule fuzzer
(fuzz_dlpack_capsules.py).

Every pointer a capsule carries is either NULL or points to memory that holds
what the header says (``ndim`` shape entries, ``ndim`` strides): lying about
the size of the memory behind a pointer is beyond what any consumer can
check, so the fuzzer does not do it.
"""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


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


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))

DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

VERSIONED_NAME = b"dltensor_versioned"


class Capsule:
    """A capsule and everything its tensor points to, kept alive together
    (the deleter only counts: the memory belongs to this object)."""

    def __init__(self, data_bytes=64, shape=None, strides=None, ndim=None, dtype=(2, 64, 1),
                 device=(1, 0), version=(1, 0), flags=0, byte_offset=0, null_data=False):
        self.deleted = 0
        self.buffer = (ctypes.c_uint8 * max(data_bytes, 1))()
        self.shape = None if shape is None else (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
        self.managed = DLManagedTensorVersioned()
        self.managed.version = DLPackVersion(*version)
        self.managed.flags = flags
        self._deleter = DELETER(self._count)
        self.managed.deleter = self._deleter
        tensor = self.managed.dl_tensor
        tensor.data = None if null_data else ctypes.addressof(self.buffer)
        tensor.device = DLDevice(*device)
        if ndim is None:
            ndim = 0 if shape is None else len(shape)
        tensor.ndim = ndim
        tensor.dtype = DLDataType(*dtype)
        tensor.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)) if self.shape is not None else None
        tensor.strides = (ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
                          if self.strides is not None else None)
        tensor.byte_offset = byte_offset
        self.capsule = _capsule_new(ctypes.addressof(self.managed), VERSIONED_NAME, None)

    def _count(self, _tensor):
        self.deleted += 1


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def element_bits(producer, bytes_per_element):
    """The elements of a C-contiguous host array as unsigned integers of
    ``bytes_per_element`` bytes, read through its DLPack export: for dtypes
    NumPy does not know (bfloat16). The capsule is left unconsumed, so its
    destructor gives the export back."""
    capsule = producer.__dlpack__(max_version=(1, 0))
    managed = ctypes.cast(_capsule_pointer(capsule, VERSIONED_NAME), ctypes.POINTER(DLManagedTensorVersioned))
    tensor = managed.contents.dl_tensor
    count = 1
    for axis in range(tensor.ndim):
        count *= tensor.shape[axis]
    raw = ctypes.string_at(tensor.data + tensor.byte_offset, count * bytes_per_element)
    return [int.from_bytes(raw[i:i + bytes_per_element], "little") for i in range(0, len(raw), bytes_per_element)]
