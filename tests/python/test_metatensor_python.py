"""The metatensor Python package reading data held in mtsarray arrays.

A TensorMap is built in-process through libmetatensor's C API (called with
ctypes, exactly as a C program would) from arrays made by mtsarray_zeros /
mtsarray_full, then wrapped by `metatensor.TensorMap.unsafe_from_ptr`: the
package reads block values, gradients and labels through the arrays'
`as_dlpack` callbacks. The other direction goes through
`mtsarray_tensormap_to` on a TensorMap of NumPy arrays. Both sides must use
one libmetatensor (the wheel's): one data-origin registry, one last error.
"""

import ctypes
import gc
import sys

import support

support.require("numpy", "metatensor")

import unittest  # noqa: E402

import metatensor  # noqa: E402
import numpy as np  # noqa: E402
from metatensor._c_api import mts_tensormap_t  # noqa: E402

import mtsarray_ctypes as mts  # noqa: E402


# metatensor-core only knows its own origins; mtsarray CPU data reads like
# any external CPU array (numpy view over the as_dlpack export).
metatensor.register_external_data_wrapper("mtsarray", metatensor.ExternalCpuArray)

# libmetatensor's C API, through the same library object the package uses
C = mts.metatensor_lib
_labels_p = ctypes.c_void_p
C.mts_labels.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, mts.mts_array_t]
C.mts_labels.restype = _labels_p
C.mts_labels_free.argtypes = [_labels_p]
C.mts_labels_free.restype = mts.mts_status_t
C.mts_block.argtypes = [mts.mts_array_t, _labels_p, ctypes.POINTER(_labels_p), ctypes.c_size_t, _labels_p]
C.mts_block.restype = ctypes.c_void_p
C.mts_block_add_gradient.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
C.mts_block_add_gradient.restype = mts.mts_status_t
C.mts_tensormap.argtypes = [_labels_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
C.mts_tensormap.restype = ctypes.c_void_p


def checked(pointer):
    if not pointer:
        raise mts.MtsArrayError(-1, mts.last_error())
    return pointer


def int32_array(values):
    """An mtsarray int32 array (mtsarray_zeros) filled through its data pointer."""
    values = np.asarray(values, dtype=np.int32)
    array = mts.MtsArray.zeros(values.shape, dtype=mts.INT32)
    target = np.ctypeslib.as_array(ctypes.cast(array.data_ptr, ctypes.POINTER(ctypes.c_int32)),
                                   (max(values.size, 1),))
    target[:values.size] = values.ravel()
    return array


def labels(names, values):
    """mts_labels over an mtsarray int32 array (the labels own the array)."""
    array = int32_array(np.asarray(values).reshape(-1, len(names)))
    c_names = (ctypes.c_char_p * len(names))(*[name.encode() for name in names])
    return checked(C.mts_labels(c_names, len(names), array.release()))


def block(values_array, samples, components, properties):
    """mts_block from a raw mtsarray array and labels (the block refcounts
    the labels, we drop our references)."""
    c_components = (_labels_p * max(len(components), 1))(*components)
    result = checked(C.mts_block(values_array.release(), samples, c_components, len(components), properties))
    for owned in [samples, properties, *components]:
        C.mts_labels_free(owned)
    return result


def expected_values(key, n_samples):
    # distinct values everywhere: value = key * 1000 + sample * 100 + xyz * 10 + property
    index = np.indices((n_samples, 3, 2))
    return key * 1000.0 + index[0] * 100 + index[1] * 10 + index[2]


def build_tensor_map_in_c():
    """Two blocks (center_type 1 and 6) of float64 values [n, 3, 2] and a
    positions gradient, every array made by mtsarray."""
    blocks = []
    for key, n_samples in [(1, 3), (6, 2)]:
        values = mts.MtsArray.full((n_samples, 3, 2), 0.0)
        memory = np.from_dlpack(values)  # zero-copy view to fill them
        memory[...] = expected_values(key, n_samples)
        del memory
        raw_block = block(values,
                          labels(["system", "atom"], [[0, i] for i in range(n_samples)]),
                          [labels(["xyz"], [[0], [1], [2]])],
                          labels(["n"], [[0], [1]]))

        gradient_values = mts.MtsArray.full((n_samples, 3, 2), -float(key))
        gradient = block(gradient_values,
                         labels(["sample", "system", "atom"], [[i, 0, i] for i in range(n_samples)]),
                         [labels(["xyz"], [[0], [1], [2]])],
                         labels(["n"], [[0], [1]]))
        mts.check(C.mts_block_add_gradient(raw_block, b"positions", gradient))
        blocks.append(raw_block)

    keys = labels(["center_type"], [[1], [6]])
    c_blocks = (ctypes.c_void_p * 2)(*blocks)
    tensor = checked(C.mts_tensormap(keys, c_blocks, 2))
    C.mts_labels_free(keys)
    return metatensor.TensorMap.unsafe_from_ptr(ctypes.cast(tensor, ctypes.POINTER(mts_tensormap_t)))


class MetatensorReadsMtsarray(unittest.TestCase):
    def test_one_libmetatensor(self):
        loaded = mts.loaded_libraries("libmetatensor")
        self.assertEqual(len(loaded), 1, loaded)
        from metatensor._c_lib import _get_library
        package = ctypes.cast(_get_library().mts_version, ctypes.c_void_p).value
        ours = ctypes.cast(mts.lib.mts_version, ctypes.c_void_p).value  # resolved through libmtsarray
        self.assertEqual(package, ours)

    def test_block_values_gradients_and_labels(self):
        tensor = build_tensor_map_in_c()
        self.assertEqual(tensor.keys.names, ["center_type"])
        np.testing.assert_array_equal(np.asarray(tensor.keys.values), [[1], [6]])
        for key, n_samples in [(1, 3), (6, 2)]:
            block = tensor.block(center_type=key)
            values = block.values
            self.assertIsInstance(values, np.ndarray)
            self.assertEqual(values.dtype, np.float64)
            np.testing.assert_array_equal(values, expected_values(key, n_samples))
            np.testing.assert_array_equal(np.asarray(block.samples.values),
                                          [[0, i] for i in range(n_samples)])
            self.assertEqual(block.samples.names, ["system", "atom"])
            self.assertEqual(block.components[0].names, ["xyz"])
            np.testing.assert_array_equal(np.asarray(block.properties.values), [[0], [1]])
            gradient = block.gradient("positions")
            np.testing.assert_array_equal(gradient.values, np.full((n_samples, 3, 2), -float(key)))
            np.testing.assert_array_equal(np.asarray(gradient.samples.values)[:, 0], np.arange(n_samples))

    def test_values_are_views_of_mtsarray_memory(self):
        tensor = build_tensor_map_in_c()
        values = tensor.block(0).values
        values[0, 0, 0] = 12345.0  # writes into the mtsarray buffer ...
        self.assertEqual(tensor.block(0).values[0, 0, 0], 12345.0)  # ... read back by a new export
        raw = tensor.block(0)._raw_values
        ours = ctypes.c_bool(False)
        as_ours = ctypes.cast(ctypes.pointer(raw), ctypes.POINTER(mts.mts_array_t))
        mts.check(mts.lib.mtsarray_is_mtsarray(as_ours, ctypes.byref(ours)))
        self.assertTrue(ours.value)

    def test_values_outlive_the_tensor_map(self):
        tensor = build_tensor_map_in_c()
        values = tensor.block(1).values
        del tensor
        gc.collect()
        np.testing.assert_array_equal(values, expected_values(6, 2))

    def test_libmetatensor_operations_on_mtsarray_data(self):
        tensor = build_tensor_map_in_c()
        # create + move_data callbacks of mtsarray, driven by libmetatensor
        merged = tensor.keys_to_samples("center_type")
        block = merged.block()
        self.assertEqual(block.samples.names, ["system", "atom", "center_type"])
        expected = {}
        for key, n_samples in [(1, 3), (6, 2)]:
            for i in range(n_samples):
                expected[(0, i, key)] = expected_values(key, n_samples)[i]
        got = {tuple(int(x) for x in sample): block.values[position]
               for position, sample in enumerate(np.asarray(block.samples.values))}
        self.assertEqual(sorted(got), sorted(expected))
        for sample, values in expected.items():
            np.testing.assert_array_equal(got[sample], values)
        self.assertEqual(mts_origin(block), "mtsarray")

        # union of the samples, missing entries filled with zeros
        moved = tensor.keys_to_properties("center_type").block()
        self.assertEqual(moved.properties.names, ["center_type", "n"])
        np.testing.assert_array_equal(np.asarray(moved.samples.values), [[0, 0], [0, 1], [0, 2]])
        expected = np.zeros((3, 3, 4))
        expected[:, :, 0:2] = expected_values(1, 3)
        expected[:2, :, 2:4] = expected_values(6, 2)
        np.testing.assert_array_equal(moved.values, expected)

    def test_save_and_load_round_trip(self):
        tensor = build_tensor_map_in_c()
        buffer = metatensor.io.save_buffer(tensor)
        loaded = metatensor.io.load_buffer(buffer)
        for index in range(2):
            np.testing.assert_array_equal(loaded.block(index).values, tensor.block(index).values)


class MtsarrayReadsMetatensor(unittest.TestCase):
    def test_tensormap_to_from_numpy_blocks(self):
        values = np.arange(24.0).reshape(4, 3, 2)
        block = metatensor.TensorBlock(
            values=values,
            samples=metatensor.Labels(["atom"], np.arange(4, dtype=np.int32).reshape(-1, 1)),
            components=[metatensor.Labels.range("xyz", 3)],
            properties=metatensor.Labels.range("n", 2),
        )
        tensor = metatensor.TensorMap(metatensor.Labels.single(), [block])

        result = ctypes.c_void_p()
        mts.check(mts.lib.mtsarray_tensormap_to(
            ctypes.cast(tensor._ptr, ctypes.c_void_p), mts.CPU, -1, ctypes.byref(result)))
        converted = metatensor.TensorMap.unsafe_from_ptr(ctypes.cast(result, ctypes.POINTER(mts_tensormap_t)))

        self.assertEqual(mts_origin(converted.block()), "mtsarray")
        copied = converted.block().values
        np.testing.assert_array_equal(copied, values)
        self.assertFalse(np.shares_memory(copied, values))
        np.testing.assert_array_equal(np.asarray(converted.block().samples.values), np.arange(4).reshape(-1, 1))

    def test_errors_reach_python_through_one_last_error(self):
        with self.assertRaises(mts.MtsArrayError) as error:
            mts.MtsArray.full((2,), 1.0).as_dlpack(stream=7)
        self.assertIn("mtsarray", error.exception.message)
        # metatensor's Python package reads the same thread-local error slot
        from metatensor._c_lib import _get_library
        message = ctypes.c_char_p()
        _get_library().mts_last_error(ctypes.byref(message), None, None)
        self.assertEqual(message.value.decode(), error.exception.message)


def mts_origin(block):
    from metatensor._data._extract import data_origin, data_origin_name
    return data_origin_name(data_origin(block._raw_values))


if __name__ == "__main__":
    sys.exit(support.run())
