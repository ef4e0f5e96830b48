"""DLPack between mtsarray and NumPy (>= 2.1), both ways, zero-copy.

mtsarray -> NumPy: ``numpy.from_dlpack(array)`` reads the capsule of
``MtsArray.__dlpack__``. NumPy -> mtsarray: ``mtsarray.from_dlpack(ndarray)``
asks for DLPack 1.x and consumes the capsule. Strided, offset and read-only
views, lifetimes, the protocol's arguments and its capsule rules.
"""

import ctypes
import gc
import re

import pytest
from conftest import require

np = require("numpy")
mtsarray = require("mtsarray")

NUMPY_VERSION = tuple(int(part) for part in np.__version__.split(".")[:2])

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]

_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name_is(capsule, name):
    return _capsule_is_valid(capsule, name) == 1


def test_numpy_speaks_versioned_dlpack():
    # max_version and the read-only flag came with NumPy 2.1
    assert NUMPY_VERSION >= (2, 1), f"NumPy {np.__version__} is too old, pin numpy>=2.1"


# ---- mtsarray -> NumPy ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_values_for_every_dtype(dtype):
    values = (np.arange(12) % 3).astype(dtype).reshape(4, 3)
    array = mtsarray.from_dlpack(values.copy())
    view = np.from_dlpack(array)
    assert view.dtype == np.dtype(dtype)
    assert view.shape == (4, 3)
    np.testing.assert_array_equal(view, values)


def test_zero_copy_both_directions():
    array = mtsarray.zeros((3, 4))
    view = np.from_dlpack(array)
    assert view.ctypes.data == array.data_ptr
    assert view.flags.writeable

    # NumPy writes, mtsarray sees it (through a second export)
    view[1, 2] = 7.0
    view[2, :] = [1, 2, 3, 4]
    again = np.from_dlpack(array)
    assert again[1, 2] == 7.0
    np.testing.assert_array_equal(again[2], [1, 2, 3, 4])

    # mtsarray writes (move_data into it), NumPy sees it
    source = mtsarray.full((1, 4), -3.0)
    array.move_data(source, np.array([[0, 0, 1, 0, 2]]))
    np.testing.assert_array_equal(view[0], [-3.0, -3.0, 0.0, 0.0])


def test_exported_view_outlives_the_array():
    array = mtsarray.full((1000,), 4.0)
    view = np.from_dlpack(array)
    del array
    gc.collect()
    # the export holds the buffer: still readable and writable
    filler = [mtsarray.full((1000,), -1.0) for _ in range(8)]
    np.testing.assert_array_equal(view, np.full(1000, 4.0))
    view += 1
    np.testing.assert_array_equal(view, np.full(1000, 5.0))
    del filler


def test_imported_memory_is_released_after_its_last_user():
    # NumPy -> mtsarray -> NumPy: the first NumPy array lives as long as
    # anything reads its memory, and no longer
    values = np.arange(6.0)
    array = mtsarray.from_dlpack(values)
    view = np.from_dlpack(array)
    assert np.shares_memory(view, values)
    del values
    del array
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(6.0))
    del view
    gc.collect()


def test_unconsumed_capsules_release_their_tensor():
    values = np.arange(4.0)
    array = mtsarray.from_dlpack(values)
    versioned = array.__dlpack__(max_version=(1, 0))
    legacy = array.__dlpack__()  # a consumer without max_version: pre-1.0 capsule
    assert capsule_name_is(versioned, b"dltensor_versioned")
    assert capsule_name_is(legacy, b"dltensor")
    del array, versioned, legacy
    gc.collect()
    np.testing.assert_array_equal(values, np.arange(4.0))


def test_dlpack_device_and_stream():
    array = mtsarray.zeros((2,))
    assert array.__dlpack_device__() == (1, 0)
    assert array.stream == -1
    # a host consumer passing stream -1 (no synchronisation) is accepted
    np.testing.assert_array_equal(np.from_dlpack(_StreamedExport(array, -1)), [0, 0])
    for stream in [0, 1, 2, 3]:
        with pytest.raises(mtsarray.Error, match="as_dlpack"):
            array.__dlpack__(stream=stream)
    with pytest.raises(TypeError, match="stream"):
        array.__dlpack__(stream=1.5)
    with pytest.raises(TypeError, match="stream"):
        array.__dlpack__(stream=True)


def test_dlpack_keywords_only():
    array = mtsarray.zeros((2,))
    with pytest.raises(TypeError):
        array.__dlpack__(None)
    with pytest.raises(TypeError):
        array.__dlpack__(max_version=1)
    with pytest.raises(TypeError):
        array.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError):
        array.__dlpack__(copy="yes")


def test_max_version():
    array = mtsarray.zeros((2,))
    assert capsule_name_is(array.__dlpack__(max_version=(1, 0)), b"dltensor_versioned")
    assert capsule_name_is(array.__dlpack__(max_version=(1, 99)), b"dltensor_versioned")
    assert capsule_name_is(array.__dlpack__(max_version=(2, 0)), b"dltensor_versioned")  # consumer checks
    assert capsule_name_is(array.__dlpack__(max_version=(0, 8)), b"dltensor")
    assert capsule_name_is(array.__dlpack__(max_version=None), b"dltensor")


def test_copy_keyword():
    array = mtsarray.full((3,), 1.0)
    copied = np.from_dlpack(array, copy=True)
    assert copied.ctypes.data != array.data_ptr
    copied[0] = 9.0
    np.testing.assert_array_equal(np.from_dlpack(array), [1.0, 1.0, 1.0])
    shared = np.from_dlpack(array, copy=False)
    assert shared.ctypes.data == array.data_ptr


def test_dl_device_keyword():
    array = mtsarray.full((3,), 2.0)
    view = np.from_dlpack(array, device="cpu")
    assert view.ctypes.data == array.data_ptr
    capsule = array.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert capsule_name_is(capsule, b"dltensor_versioned")
    with pytest.raises(BufferError, match="copy=False"):
        array.__dlpack__(max_version=(1, 0), dl_device=(2, 0), copy=False)
    with pytest.raises(ValueError):
        array.__dlpack__(max_version=(1, 0), dl_device=(1,))
    if not mtsarray.backend_available("cuda"):
        with pytest.raises(mtsarray.Error, match="CUDA"):
            array.__dlpack__(max_version=(1, 0), dl_device=(2, 0))


def test_read_only_exports_need_dlpack_1():
    values = np.arange(3.0)
    values.flags.writeable = False
    array = mtsarray.from_dlpack(values)  # mtsarray copies read-only data: its copy is writable
    assert capsule_name_is(array.__dlpack__(), b"dltensor")


class _StreamedExport:
    """Forwards __dlpack__ with a fixed consumer stream number."""

    def __init__(self, array, stream):
        self.array, self.stream = array, stream

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        kwargs["stream"] = self.stream
        return self.array.__dlpack__(**kwargs)


# ---- NumPy -> mtsarray ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_copy_import(dtype):
    values = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    array = mtsarray.from_dlpack(values)
    assert array.shape == (3, 4)
    assert array.dtype == np.dtype(dtype)
    assert array.data_ptr == values.ctypes.data
    values[2, 3] = 1
    assert np.from_dlpack(array)[2, 3] == 1
    assert np.shares_memory(np.from_dlpack(array), values)


def test_numpy_array_outlived_by_import():
    values = np.arange(1000.0)
    address = values.ctypes.data
    array = mtsarray.from_dlpack(values)
    del values
    gc.collect()
    assert array.data_ptr == address
    np.testing.assert_array_equal(np.from_dlpack(array), np.arange(1000.0))


def test_non_contiguous_views_are_copied():
    base = np.arange(30.0).reshape(5, 6)
    for view in [base[:, ::2], base.T, base[::-1], base[1:4, 2:5], np.asfortranarray(base)]:
        array = mtsarray.from_dlpack(view)
        assert array.shape == view.shape
        result = np.from_dlpack(array)
        np.testing.assert_array_equal(result, view)
        assert result.flags.c_contiguous
        assert not np.shares_memory(result, base)


def test_contiguous_offset_view_is_zero_copy():
    base = np.arange(30.0).reshape(5, 6)
    view = base[2:4]  # C-contiguous, starts inside base
    array = mtsarray.from_dlpack(view)
    assert array.data_ptr == view.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(array), view)
    del base, view
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(array), np.arange(12.0, 24.0).reshape(2, 6))


def test_read_only_arrays_are_copied():
    values = np.arange(6.0).reshape(2, 3)
    values.flags.writeable = False
    array = mtsarray.from_dlpack(values)
    assert array.data_ptr != values.ctypes.data
    result = np.from_dlpack(array)
    np.testing.assert_array_equal(result, values)
    result[0, 0] = -1.0  # our copy is writable, the original untouched
    assert values[0, 0] == 0.0


def test_broadcast_views_are_copied():
    values = np.broadcast_to(np.arange(3.0), (4, 3))  # stride 0, read-only
    array = mtsarray.from_dlpack(values)
    np.testing.assert_array_equal(np.from_dlpack(array), values)


def test_legacy_producer():
    # a producer older than DLPack 1.0: __dlpack__(stream) and a "dltensor" capsule
    values = np.arange(5.0)

    class Legacy:
        def __dlpack__(self, stream=None):
            return values.__dlpack__(stream=stream)

    array = mtsarray.from_dlpack(Legacy())
    assert array.data_ptr == values.ctypes.data
    values[4] = -4.0
    np.testing.assert_array_equal(np.from_dlpack(array), [0, 1, 2, 3, -4])


def test_capsules_are_taken_directly_and_consumed_once():
    values = np.ones(3)
    capsule = values.__dlpack__(max_version=(1, 0))
    array = mtsarray.from_dlpack(capsule)
    assert capsule_name_is(capsule, b"used_dltensor_versioned")
    with pytest.raises(TypeError, match="consumed only once"):
        mtsarray.from_dlpack(capsule)
    del capsule  # NumPy's destructor leaves a used capsule alone
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(array), [1, 1, 1])

    legacy = values.__dlpack__()
    mtsarray.from_dlpack(legacy)
    assert capsule_name_is(legacy, b"used_dltensor")


def test_round_trip_through_mtsarray_shares_memory():
    values = np.linspace(0, 1, 7)
    back = np.from_dlpack(mtsarray.from_dlpack(values))
    assert np.shares_memory(back, values)
    np.testing.assert_array_equal(back, values)
    again = mtsarray.from_dlpack(mtsarray.from_dlpack(values))
    assert again.data_ptr == values.ctypes.data


def test_objects_that_do_not_speak_dlpack():
    for not_dlpack in [3, [1.0, 2.0], "abc", None, object()]:
        with pytest.raises(TypeError, match="DLPack"):
            mtsarray.from_dlpack(not_dlpack)

    class ReturnsNonsense:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(TypeError, match="not a DLPack capsule"):
        mtsarray.from_dlpack(ReturnsNonsense())

    class Raises:
        def __dlpack__(self, **kwargs):
            raise BufferError("no export today")

    with pytest.raises(BufferError, match="no export today"):
        mtsarray.from_dlpack(Raises())


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, "datetime64[s]", object])
def test_numpy_dtypes_dlpack_can_not_carry(dtype):
    values = np.zeros(3, dtype=dtype)
    with pytest.raises((BufferError, TypeError, mtsarray.Error)):
        mtsarray.from_dlpack(values)


class _RecordingHostProducer:
    """NumPy's data behind a producer that records what from_dlpack asks of it."""

    def __init__(self, values):
        self.values = values
        self.calls = []

    def __dlpack_device__(self):
        return self.values.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.values.__dlpack__(**kwargs)


def test_streams_passed_to_a_host_producer():
    # mtsarray checks the stream against the producer's device before it asks
    # the producer anything, and gives its own error, whatever the producer
    # (NumPy >= 2.3 refuses every stream but None, in its own words)
    recording = _RecordingHostProducer(np.zeros(3))
    for producer in [np.zeros(3), mtsarray.zeros(3), recording]:
        for stream in [0, 1, 2, 5]:
            expected = (f"from_dlpack: invalid DLPack stream number {stream} for cpu: cpu memory has no streams, "
                        "only -1 (or NULL) is valid")
            with pytest.raises(mtsarray.Error, match=f"^{re.escape(expected)}$"):
                mtsarray.from_dlpack(producer, stream=stream)
    assert recording.calls == []

    # -1 (no synchronisation) is valid on the CPU; a host producer is asked
    # without a stream, as DLPack wants of CPU producers
    recording = _RecordingHostProducer(np.arange(3.0))
    for producer in [np.arange(3.0), mtsarray.from_dlpack(np.arange(3.0)), recording]:
        array = mtsarray.from_dlpack(producer, stream=-1)
        assert array.stream == -1
        np.testing.assert_array_equal(np.asarray(array), [0.0, 1.0, 2.0])
    assert len(recording.calls) == 1 and "stream" not in recording.calls[0]


class _RecordingGpuProducer:
    """A CUDA/ROCm producer that records what from_dlpack asks of it."""

    def __init__(self, device_type):
        self.device_type = device_type
        self.calls = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        raise BufferError("recorded")


@pytest.mark.parametrize("device_type, default", [(2, 1), (10, 0)])
def test_from_dlpack_names_the_stream_to_gpu_producers(device_type, default):
    producer = _RecordingGpuProducer(device_type)
    with pytest.raises(BufferError, match="recorded"):
        mtsarray.from_dlpack(producer)
    with pytest.raises(BufferError, match="recorded"):
        mtsarray.from_dlpack(producer, stream=12345)

    class TorchLikeStream:
        cuda_stream = 0  # the default stream's handle

    with pytest.raises(BufferError, match="recorded"):
        mtsarray.from_dlpack(producer, stream=TorchLikeStream())
    assert [call["stream"] for call in producer.calls] == [default, 12345, default]
    assert all(call["max_version"][0] == 1 for call in producer.calls)  # DLPack 1.x asked for


class _DeviceProducer:
    """NumPy's data behind a producer whose __dlpack_device__ says `device`."""

    def __init__(self, device):
        self.device = device
        self.calls = 0

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        self.calls += 1
        return np.zeros(3).__dlpack__(**kwargs)


@pytest.mark.parametrize("device", [(1, 2**31), (1, 2**63), (1, -1), (2, 2**31), (2**31, 0), (-1, 0)])
@pytest.mark.parametrize("stream", [None, -1])
def test_producer_devices_out_of_range(device, stream):
    # a DLDevice holds an int32 device id and an enum device type: anything
    # else a producer reports is its error, said before it is asked for data
    producer = _DeviceProducer(device)
    with pytest.raises(ValueError, match=re.escape(f"__dlpack_device__() returned {device!r}")):
        mtsarray.from_dlpack(producer, stream=stream)
    assert producer.calls == 0


@pytest.mark.parametrize("device", [None, (1,), (1, 0, 0), ("cpu", 0), (1.0, 0), "cpu"])
def test_producer_devices_that_are_not_pairs_of_integers(device):
    producer = _DeviceProducer(device)
    with pytest.raises(TypeError, match=re.escape("__dlpack_device__() returned")):
        mtsarray.from_dlpack(producer, stream=-1)
    assert producer.calls == 0


class _DefaultStreamObject:
    cuda_stream = 0  # the handle of a default stream, as torch.cuda.Stream says it


def test_stream_objects_with_capsules_are_resolved_for_the_tensors_device():
    # a capsule says its device once taken: the stream is judged for it
    capsule = np.zeros(3).__dlpack__(max_version=(1, 0))
    with pytest.raises(mtsarray.Error, match="invalid DLPack stream number 0 for cpu"):
        mtsarray.from_dlpack(capsule, stream=_DefaultStreamObject())
    array = mtsarray.from_dlpack(np.arange(3.0).__dlpack__(max_version=(1, 0)), stream=-1)
    assert array.stream == -1


def test_stream_objects_need_the_producers_device():
    values = np.arange(3.0)

    class Legacy:
        def __init__(self):
            self.streams = []

        def __dlpack__(self, stream=None):
            self.streams.append(stream)
            return values.__dlpack__()

    with pytest.raises(TypeError, match="no __dlpack_device__"):
        mtsarray.from_dlpack(Legacy(), stream=_DefaultStreamObject())
    # a number goes to the producer as given, judged for its tensor's device
    producer = Legacy()
    with pytest.raises(mtsarray.Error, match="cpu memory has no streams"):
        mtsarray.from_dlpack(producer, stream=5)
    assert mtsarray.from_dlpack(producer, stream=-1).data_ptr == values.ctypes.data
    assert producer.streams == [5, -1]
