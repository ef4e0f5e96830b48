"""DLPack round trips between mtsarray (through ctypes) and NumPy >= 2.1.

mtsarray -> NumPy: `numpy.from_dlpack` on an object whose `__dlpack__` wraps
the array's `as_dlpack` callback in a "dltensor_versioned" capsule.
NumPy -> mtsarray: `ndarray.__dlpack__(max_version=(1, 0))`, the capsule
consumed (renamed "used_dltensor_versioned") and its tensor handed to
`mtsarray_from_dlpack`.
"""

import ctypes
import gc
import sys

import support

support.require("numpy")

import unittest  # noqa: E402

import numpy as np  # noqa: E402

import mtsarray_ctypes as mts  # noqa: E402


NUMPY_VERSION = tuple(int(part) for part in np.__version__.split(".")[:2])

DTYPES = [
    (mts.FLOAT64, np.float64, 2.5),
    (mts.FLOAT32, np.float32, -1.25),
    (mts.INT32, np.int32, 42),
    (mts.INT64, np.int64, -(2**40)),
]


class WrapDeleter:
    """A C deleter for mtsarray_wrap that counts its calls."""

    def __init__(self):
        self.calls = 0
        self.callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._called)

    def _called(self, _context):
        self.calls += 1


def wrap(values, deleter):
    """mtsarray_wrap over a NumPy buffer (kept alive by the caller)."""
    raw = mts.mts_array_t()
    dims, count = mts._shape_array(values.shape)
    dtype = {np.dtype(np.float64): mts.FLOAT64}[values.dtype]
    mts.check(mts.lib.mtsarray_wrap(values.ctypes.data, mts.CPU, dtype, dims, count,
                                    ctypes.cast(deleter.callback, ctypes.c_void_p), None,
                                    ctypes.byref(raw)))
    return mts.MtsArray(raw)


class NumpyVersion(unittest.TestCase):
    def test_numpy_speaks_versioned_dlpack(self):
        # max_version in __dlpack__ and the read-only flag came with NumPy 2.1
        self.assertGreaterEqual(NUMPY_VERSION, (2, 1), f"NumPy {np.__version__} is too old, pin numpy>=2.1")
        capsule = np.zeros(3).__dlpack__(max_version=(1, 0))
        self.assertTrue(mts._api.PyCapsule_IsValid(capsule, mts.DLTENSOR_VERSIONED))


class MtsarrayToNumpy(unittest.TestCase):
    def test_values_for_every_dtype(self):
        for dtype, np_dtype, value in DTYPES:
            with self.subTest(dtype=np.dtype(np_dtype).name):
                array = mts.MtsArray.full((4, 3), value, dtype=dtype)
                view = np.from_dlpack(array)
                self.assertEqual(view.dtype, np_dtype)
                self.assertEqual(view.shape, (4, 3))
                np.testing.assert_array_equal(view, np.full((4, 3), value, dtype=np_dtype))

    def test_shapes(self):
        for shape in [(), (0,), (5,), (2, 0, 3), (2, 3, 4, 1)]:
            with self.subTest(shape=shape):
                view = np.from_dlpack(mts.MtsArray.full(shape, 1.5))
                self.assertEqual(view.shape, shape)
                np.testing.assert_array_equal(view, np.full(shape, 1.5))

    def test_zero_copy_both_directions(self):
        array = mts.MtsArray.zeros((3, 4))
        view = np.from_dlpack(array)
        self.assertEqual(view.ctypes.data, array.data_ptr)
        self.assertTrue(view.flags.writeable)

        # NumPy writes, mtsarray sees it (through a second export and raw memory)
        view[1, 2] = 7.0
        view[2, :] = [1, 2, 3, 4]
        again = np.from_dlpack(array)
        self.assertEqual(again[1, 2], 7.0)
        np.testing.assert_array_equal(again[2], [1, 2, 3, 4])
        raw = np.ctypeslib.as_array(ctypes.cast(array.data_ptr, ctypes.POINTER(ctypes.c_double)), (12,))
        self.assertEqual(raw[6], 7.0)

        # mtsarray writes (move_data into it), NumPy sees it
        source = mts.MtsArray.full((1, 4), -3.0)
        array.move_data(source, [(0, 0, 1, 0, 2)])
        np.testing.assert_array_equal(view[0], [-3.0, -3.0, 0.0, 0.0])

    def test_data_outlives_the_array(self):
        array = mts.MtsArray.full((1000,), 4.0)
        view = np.from_dlpack(array)
        array.destroy()
        del array
        gc.collect()
        # the export holds a reference to the buffer: still readable and writable
        filler = [mts.MtsArray.full((1000,), -1.0) for _ in range(8)]
        np.testing.assert_array_equal(view, np.full(1000, 4.0))
        view += 1
        np.testing.assert_array_equal(view, np.full(1000, 5.0))
        del filler

    def test_wrapped_memory_is_released_once_after_the_last_user(self):
        memory = np.arange(6.0).reshape(2, 3)
        deleter = WrapDeleter()
        array = wrap(memory, deleter)
        view = np.from_dlpack(array)
        self.assertEqual(view.ctypes.data, memory.ctypes.data)
        array.destroy()
        self.assertEqual(deleter.calls, 0, "NumPy still holds the export")
        np.testing.assert_array_equal(view, memory)
        del view
        gc.collect()
        self.assertEqual(deleter.calls, 1)

    def test_unconsumed_capsules_release_their_tensor(self):
        memory = np.arange(4.0)
        deleter = WrapDeleter()
        array = wrap(memory, deleter)
        versioned = array.__dlpack__(max_version=(1, 0))
        legacy = array.__dlpack__()  # a consumer without max_version: pre-1.0 capsule
        self.assertTrue(mts._api.PyCapsule_IsValid(versioned, mts.DLTENSOR_VERSIONED))
        self.assertTrue(mts._api.PyCapsule_IsValid(legacy, mts.DLTENSOR))
        array.destroy()
        del versioned
        self.assertEqual(deleter.calls, 0)
        del legacy
        gc.collect()
        self.assertEqual(deleter.calls, 1)

    def test_dlpack_device_and_stream(self):
        array = mts.MtsArray.zeros((2,))
        self.assertEqual(array.__dlpack_device__(), (mts.kDLCPU, 0))
        self.assertEqual(array.stream, -1)
        # a host consumer passing stream -1 (no synchronisation) is accepted
        np.testing.assert_array_equal(np.from_dlpack(_StreamedExport(array, -1)), [0, 0])
        with self.assertRaises(mts.MtsArrayError) as error:
            array.as_dlpack(stream=3)
        self.assertIn("as_dlpack", error.exception.message)

    def test_copy_keyword(self):
        array = mts.MtsArray.full((3,), 1.0)
        copied = np.from_dlpack(array, copy=True)
        self.assertNotEqual(copied.ctypes.data, array.data_ptr)
        copied[0] = 9.0
        np.testing.assert_array_equal(np.from_dlpack(array), [1.0, 1.0, 1.0])


class _StreamedExport:
    """Forwards __dlpack__ with a fixed consumer stream number."""

    def __init__(self, array, stream):
        self.array, self.stream = array, stream

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        kwargs["stream"] = self.stream
        return self.array.__dlpack__(**kwargs)


class NumpyToMtsarray(unittest.TestCase):
    def test_zero_copy_import(self):
        for dtype, np_dtype, _ in DTYPES:
            with self.subTest(dtype=np.dtype(np_dtype).name):
                values = np.arange(12, dtype=np_dtype).reshape(3, 4)
                array = mts.MtsArray.from_dlpack(values)
                self.assertTrue(array.is_mtsarray())
                self.assertEqual(array.origin_name, "mtsarray")
                self.assertEqual(array.shape, (3, 4))
                self.assertEqual((array.dtype.code, array.dtype.bits), (dtype.code, dtype.bits))
                self.assertEqual(array.data_ptr, values.ctypes.data)
                values[2, 3] = 100
                np.testing.assert_array_equal(np.from_dlpack(array)[2], [8, 9, 10, 100])
                self.assertTrue(np.shares_memory(np.from_dlpack(array), values))

    def test_capsule_protocol(self):
        values = np.ones(3)
        capsule = values.__dlpack__(max_version=(1, 0))
        tensor = mts.consume_capsule(capsule)
        self.assertTrue(mts._api.PyCapsule_IsValid(capsule, mts.USED_DLTENSOR_VERSIONED))
        self.assertEqual(tensor.contents.version.major, 1)
        self.assertEqual(tensor.contents.dl_tensor.data, values.ctypes.data)
        with self.assertRaises(ValueError):
            mts.consume_capsule(capsule)  # a capsule is consumed once
        array = mts.MtsArray.from_dlpack_tensor(tensor)
        del capsule  # NumPy's destructor leaves a used capsule alone
        gc.collect()
        np.testing.assert_array_equal(np.from_dlpack(array), [1, 1, 1])

    def test_numpy_array_outlived_by_import(self):
        values = np.arange(1000.0)
        address = values.ctypes.data
        array = mts.MtsArray.from_dlpack(values)
        del values
        gc.collect()
        self.assertEqual(array.data_ptr, address)
        np.testing.assert_array_equal(np.from_dlpack(array), np.arange(1000.0))

    def test_move_data_into_another_mtsarray_array(self):
        values = np.arange(24.0).reshape(4, 2, 3)  # samples x components x properties
        source = mts.MtsArray.from_dlpack(values)
        output = mts.MtsArray.zeros((3, 2, 5))
        movements = [(3, 0, 0, 2, 3), (0, 2, 1, 0, 2), (1, 1, 2, 4, 1)]
        output.move_data(source, movements)

        expected = np.zeros((3, 2, 5))
        for sample_in, sample_out, start_in, start_out, length in movements:
            expected[sample_out, :, start_out:start_out + length] = \
                values[sample_in, :, start_in:start_in + length]
        np.testing.assert_array_equal(np.from_dlpack(output), expected)

    def test_move_data_errors_leave_output_untouched(self):
        source = mts.MtsArray.from_dlpack(np.ones((2, 3), dtype=np.float32))
        output = mts.MtsArray.full((2, 3), 5.0)
        with self.assertRaises(mts.MtsArrayError) as error:
            output.move_data(source, [(0, 0, 0, 0, 3)])
        self.assertIn("move_data", error.exception.message)
        with self.assertRaises(mts.MtsArrayError):
            output.move_data(mts.MtsArray.zeros((2, 3)), [(0, 0, 0, 0, 3), (5, 0, 0, 0, 1)])
        np.testing.assert_array_equal(np.from_dlpack(output), np.full((2, 3), 5.0))

    def test_non_contiguous_views_are_copied(self):
        base = np.arange(30.0).reshape(5, 6)
        for name, view in [("strided", base[:, ::2]), ("transposed", base.T),
                           ("negative stride", base[::-1]), ("offset slice", base[1:4, 2:5])]:
            with self.subTest(view=name):
                array = mts.MtsArray.from_dlpack(view)
                self.assertEqual(array.shape, view.shape)
                result = np.from_dlpack(array)
                np.testing.assert_array_equal(result, view)
                self.assertTrue(result.flags.c_contiguous)
                self.assertFalse(np.shares_memory(result, base))

    def test_contiguous_offset_view_is_zero_copy(self):
        base = np.arange(30.0).reshape(5, 6)
        view = base[2:4]  # C-contiguous, starts inside base
        array = mts.MtsArray.from_dlpack(view)
        self.assertEqual(array.data_ptr, view.ctypes.data)
        np.testing.assert_array_equal(np.from_dlpack(array), view)

    def test_read_only_arrays_are_copied(self):
        values = np.arange(6.0).reshape(2, 3)
        values.flags.writeable = False
        capsule = values.__dlpack__(max_version=(1, 0))
        tensor = mts.consume_capsule(capsule)
        self.assertTrue(tensor.contents.flags & mts.DLPACK_FLAG_BITMASK_READ_ONLY)
        array = mts.MtsArray.from_dlpack_tensor(tensor)
        self.assertNotEqual(array.data_ptr, values.ctypes.data)
        result = np.from_dlpack(array)
        np.testing.assert_array_equal(result, values)
        result[0, 0] = -1.0  # our copy is writable, the original untouched
        self.assertEqual(values[0, 0], 0.0)

    def test_legacy_producer(self):
        # a producer older than DLPack 1.0: __dlpack__(stream) and a "dltensor" capsule
        values = np.arange(5.0)

        class Legacy:
            def __dlpack__(self, stream=None):
                return values.__dlpack__(stream=stream)

        array = mts.MtsArray.from_dlpack(Legacy())
        self.assertEqual(array.data_ptr, values.ctypes.data)
        values[4] = -4.0
        np.testing.assert_array_equal(np.from_dlpack(array), [0, 1, 2, 3, -4])

    def test_round_trip_shares_memory(self):
        values = np.linspace(0, 1, 7)
        back = np.from_dlpack(mts.MtsArray.from_dlpack(values))
        self.assertTrue(np.shares_memory(back, values))
        np.testing.assert_array_equal(back, values)


class OneLibmetatensor(unittest.TestCase):
    def test_single_libmetatensor_in_process(self):
        loaded = mts.loaded_libraries("libmetatensor")
        self.assertEqual(len(loaded), 1, loaded)


if __name__ == "__main__":
    sys.exit(support.run())
