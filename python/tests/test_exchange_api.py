"""MtsArray's DLPack C exchange API (``__dlpack_c_exchange_api__``, DLPack
1.3), read by a C consumer (dlpack_exchange_consumer.c) as another
framework's extension would: the table's version and functions, a zero-copy
export of an array, the allocator and the hand-back to Python, and the
errors a consumer gets as Python exceptions."""

import ctypes
import gc

import pytest
from conftest import require

np = require("numpy")
mtsarray = require("mtsarray")

import exchange_consumer  # noqa: E402

CONSUMER, REASON = exchange_consumer.load()
pytestmark = pytest.mark.skipif(CONSUMER is None, reason=REASON or "")

_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def test_published_on_the_type_as_a_named_capsule():
    capsule = mtsarray.MtsArray.__dlpack_c_exchange_api__
    assert _capsule_is_valid(capsule, b"dlpack_exchange_api") == 1
    # the same table for every array, found on the type (DLPack 1.3)
    assert mtsarray.zeros((2,), "float64").__dlpack_c_exchange_api__ is capsule


def test_version_and_functions():
    out = (ctypes.c_int64 * 8)()
    assert CONSUMER.consumer_describe(mtsarray.zeros((1,), "float64"), out) == 0
    major, minor, has_prev, allocator, from_object, to_object, dltensor_from, stream = out
    assert (major, minor) == (1, 3)
    assert has_prev == 0
    # the four a producer must give; the borrowed-DLTensor one is optional
    assert (allocator, from_object, to_object, stream) == (1, 1, 1, 1)
    assert dltensor_from == 0


def test_export_reads_the_arrays_memory_without_a_copy():
    values = np.arange(12, dtype=np.float64).reshape(3, 4)
    array = mtsarray.from_dlpack(values)
    out = (ctypes.c_int64 * 10)()
    total = ctypes.c_double()
    assert CONSUMER.consumer_read(array, out, ctypes.byref(total)) == 0
    device_type, device_id, ndim, stream, version_major, flags = out[:6]
    assert (device_type, device_id, ndim) == (1, 0, 2)  # kDLCPU
    assert tuple(out[6:8]) == (3, 4)
    assert stream == 0  # current_work_stream: NULL, the default stream
    assert version_major == 1
    assert flags & 2 == 0  # DLPACK_FLAG_BITMASK_IS_COPIED: the array's own memory
    assert total.value == values.sum()
    # the consumer released its tensor; a change made since is seen by the next one
    values[0, 0] = 100.0
    assert CONSUMER.consumer_read(array, out, ctypes.byref(total)) == 0
    assert total.value == values.sum()


def test_allocator_and_hand_back_to_python():
    made = CONSUMER.consumer_allocate(mtsarray.zeros((1,), "float64"), 5, 64)
    assert isinstance(made, mtsarray.MtsArray)
    assert made.shape == (5,) and made.device == "cpu"
    np.testing.assert_array_equal(np.from_dlpack(made), [0.0, 1.0, 2.0, 3.0, 4.0])
    del made
    gc.collect()


def test_errors_are_python_exceptions():
    out = (ctypes.c_int64 * 10)()
    total = ctypes.c_double()
    array = mtsarray.zeros((2,), "float64")
    api = mtsarray.MtsArray.__dlpack_c_exchange_api__
    # a consumer that calls the table with another type's object
    fake = type("NotAnArray", (), {"__dlpack_c_exchange_api__": api})()
    with pytest.raises(TypeError, match="managed_tensor_from_py_object_no_sync: expected an MtsArray"):
        CONSUMER.consumer_read(fake, out, ctypes.byref(total))
    # the allocator's errors go through the consumer's SetError
    with pytest.raises(ValueError, match="managed_tensor_allocator: the prototype has no shape"):
        CONSUMER.consumer_allocate(array, -1, 64)
    with pytest.raises(RuntimeError, match="managed_tensor_allocator: .*dtype"):
        CONSUMER.consumer_allocate(array, 4, 7)


def test_from_dlpack_of_an_mtsarray_is_unchanged():
    # mtsarray's own consumer reads other frameworks' tables; an MtsArray still
    # goes through __dlpack__ and keeps its values
    source = mtsarray.from_dlpack(np.arange(3, dtype=np.float64))
    again = mtsarray.from_dlpack(source)
    np.testing.assert_array_equal(np.from_dlpack(again), [0.0, 1.0, 2.0])


def test_hand_off_costs_are_measurable():
    array = mtsarray.zeros((4,), "float64")
    through_api = CONSUMER.consumer_time(array, 1000, 1)
    through_dlpack = CONSUMER.consumer_time(array, 1000, 0)
    assert 0 < through_api < 1e-3
    assert 0 < through_dlpack < 1e-3
