"""The metatensor package reading and operating on TensorMaps moved with
mtsarray.tensormap_to, through one libmetatensor shared by both packages."""

import ctypes
import gc
import os

import pytest
from conftest import loaded_libraries, require

np = require("numpy")
metatensor = require("metatensor")
mtsarray = require("mtsarray")

from metatensor import Labels, TensorBlock, TensorMap  # noqa: E402


def expected_values(key, n_samples, dtype=np.float64):
    # distinct values everywhere: key * 1000 + sample * 100 + xyz * 10 + property
    index = np.indices((n_samples, 3, 2))
    return (key * 1000 + index[0] * 100 + index[1] * 10 + index[2]).astype(dtype)


def numpy_tensor_map(dtype=np.float64):
    """Two blocks (center_type 1 and 6) of values [n, 3, 2] with a positions
    gradient, all NumPy."""
    blocks = []
    for key, n_samples in [(1, 3), (6, 2)]:
        block = TensorBlock(
            values=expected_values(key, n_samples, dtype),
            samples=Labels(["system", "atom"], np.array([[0, i] for i in range(n_samples)], dtype=np.int32)),
            components=[Labels.range("xyz", 3)],
            properties=Labels.range("n", 2),
        )
        gradient = TensorBlock(
            values=np.full((n_samples, 3, 2), -float(key), dtype=dtype),
            samples=Labels(["sample", "system", "atom"],
                           np.array([[i, 0, i] for i in range(n_samples)], dtype=np.int32)),
            components=[Labels.range("xyz", 3)],
            properties=Labels.range("n", 2),
        )
        block.add_gradient("positions", gradient)
        blocks.append(block)
    tensor = TensorMap(Labels(["center_type"], np.array([[1], [6]], dtype=np.int32)), blocks)
    tensor.set_info("units", "eV")
    return tensor


def origin(array_view):
    """The data origin name of a block's values, read by metatensor."""
    from metatensor._data._extract import data_origin, data_origin_name
    return data_origin_name(data_origin(array_view))


@pytest.fixture
def moved():
    return mtsarray.tensormap_to(numpy_tensor_map(), "cpu")


def test_one_libmetatensor_in_the_process():
    loaded = loaded_libraries("libmetatensor")
    assert len(loaded) == 1, loaded
    # and libmtsarray resolves libmetatensor's symbols to that copy
    from metatensor._c_lib import _get_library
    ours = [path for path in loaded_libraries("libmtsarray")]
    assert len(ours) == 1, ours
    libmtsarray = ctypes.CDLL(ours[0], mode=os.RTLD_NOLOAD)
    package = ctypes.cast(_get_library().mts_version, ctypes.c_void_p).value
    through_mtsarray = ctypes.cast(libmtsarray.mts_version, ctypes.c_void_p).value
    assert package == through_mtsarray


def test_values_gradients_and_labels(moved):
    assert moved.keys.names == ["center_type"]
    np.testing.assert_array_equal(moved.keys.values, [[1], [6]])
    assert moved.get_info("units") == "eV"
    for key, n_samples in [(1, 3), (6, 2)]:
        block = moved.block(center_type=key)
        values = block.values
        assert isinstance(values, mtsarray.MtsArray)
        assert values.is_view
        assert values.dtype == np.float64 and values.device == "cpu" and values.shape == (n_samples, 3, 2)
        assert len(block) == n_samples
        assert block.shape == (n_samples, 3, 2)
        np.testing.assert_array_equal(np.asarray(values), expected_values(key, n_samples))
        assert isinstance(block.samples.values, np.ndarray)
        np.testing.assert_array_equal(block.samples.values, [[0, i] for i in range(n_samples)])
        assert block.samples.names == ["system", "atom"]
        assert block.components[0].names == ["xyz"]
        np.testing.assert_array_equal(block.properties.values, [[0], [1]])
        gradient = block.gradient("positions")
        np.testing.assert_array_equal(np.asarray(gradient.values), np.full((n_samples, 3, 2), -float(key)))
        np.testing.assert_array_equal(gradient.samples.values[:, 0], np.arange(n_samples))
        assert origin(block._raw_values) == "mtsarray"
        assert origin(block.samples._raw_values) == "mtsarray"


def test_the_copy_is_a_copy():
    tensor = numpy_tensor_map()
    moved = mtsarray.tensormap_to(tensor, "cpu")
    original = tensor.block(0).values
    copied = np.asarray(moved.block(0).values)
    assert not np.shares_memory(copied, original)
    copied[0, 0, 0] = -1.0
    assert tensor.block(0).values[0, 0, 0] == 1000.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.complex128])
def test_dtypes(dtype):
    moved = mtsarray.tensormap_to(numpy_tensor_map(dtype), "cpu")
    values = moved.block(1).values
    assert values.dtype == dtype
    np.testing.assert_array_equal(np.asarray(values), expected_values(6, 2, dtype))


def test_values_are_writable_views_of_block_memory(moved):
    values = moved.block(0).values
    np.from_dlpack(values)[0, 0, 0] = 12345.0  # writes into the block's array ...
    assert np.asarray(moved.block(0).values)[0, 0, 0] == 12345.0  # ... read back by a new view
    # move_data into a block's values
    source = mtsarray.full((1, 3, 2), 7.0)
    values.move_data(source, [[0, 1, 0, 0, 2]])
    np.testing.assert_array_equal(np.asarray(moved.block(0).values)[1], np.full((3, 2), 7.0))


def test_views_keep_their_block_alive():
    values = mtsarray.tensormap_to(numpy_tensor_map(), "cpu").block(1).values
    gc.collect()
    np.testing.assert_array_equal(np.asarray(values), expected_values(6, 2))
    exported = np.from_dlpack(values)
    del values
    gc.collect()
    np.testing.assert_array_equal(exported, expected_values(6, 2))


def test_views_metadata_can_not_change(moved):
    values = moved.block(0).values
    with pytest.raises(ValueError, match="metatensor owns"):
        values.reshape((9, 2))
    with pytest.raises(ValueError, match="metatensor owns"):
        values.swap_axes(0, 1)
    with pytest.raises(ValueError, match="metatensor owns"):
        values.stream = -1
    # a copy is the user's own
    copied = values.copy()
    assert not copied.is_view
    copied.reshape((9, 2))


def test_keys_to_samples(moved):
    merged = moved.keys_to_samples("center_type")
    block = merged.block()
    assert block.samples.names == ["system", "atom", "center_type"]
    assert isinstance(block.values, mtsarray.MtsArray)
    values = np.asarray(block.values)
    expected = {}
    for key, n_samples in [(1, 3), (6, 2)]:
        for i in range(n_samples):
            expected[(0, i, key)] = expected_values(key, n_samples)[i]
    got = {tuple(int(x) for x in sample): values[position]
           for position, sample in enumerate(block.samples.values)}
    assert sorted(got) == sorted(expected)
    for sample, value in expected.items():
        np.testing.assert_array_equal(got[sample], value)
    gradient = block.gradient("positions")
    assert gradient.values.shape == (5, 3, 2)


def test_keys_to_properties_fills_missing_entries(moved):
    block = moved.keys_to_properties("center_type", fill_value=-2.0).block()
    assert block.properties.names == ["center_type", "n"]
    np.testing.assert_array_equal(block.samples.values, [[0, 0], [0, 1], [0, 2]])
    expected = np.full((3, 3, 4), -2.0)
    expected[:, :, 0:2] = expected_values(1, 3)
    expected[:2, :, 2:4] = expected_values(6, 2)
    np.testing.assert_array_equal(np.asarray(block.values), expected)


def test_components_to_properties(moved):
    block = moved.components_to_properties("xyz").block(0)
    assert block.values.shape == (3, 6)
    np.testing.assert_array_equal(np.asarray(block.values), expected_values(1, 3).reshape(3, 6))


def test_copy_selection_iteration_and_printing(moved):
    copied = moved.copy()
    np.testing.assert_array_equal(np.asarray(copied.block(1).values), expected_values(6, 2))
    assert copied.block(1).values.data_ptr != moved.block(1).values.data_ptr
    assert [int(key[0]) for key, _ in moved.items()] == [1, 6]
    assert len(moved.blocks(center_type=6)) == 1
    assert "TensorBlock with shape (2, 3, 2)" in str(moved)
    assert "center_type" in repr(moved.keys)


def test_save_and_load_round_trip(moved):
    loaded = metatensor.io.load_buffer(metatensor.io.save_buffer(moved))
    for index in range(2):
        np.testing.assert_array_equal(loaded.block(index).values, np.asarray(moved.block(index).values))


def test_moving_a_moved_tensor_map(moved):
    again = mtsarray.tensormap_to(moved, "cpu")
    np.testing.assert_array_equal(np.asarray(again.block(1).values), expected_values(6, 2))
    assert again.block(1).values.data_ptr != moved.block(1).values.data_ptr


def test_errors(moved):
    with pytest.raises(TypeError, match="TensorMap"):
        mtsarray.tensormap_to(moved.block(0), "cpu")
    with pytest.raises(ValueError, match="unknown device"):
        mtsarray.tensormap_to(moved, "gpu")
    with pytest.raises(mtsarray.Error, match="stream"):
        mtsarray.tensormap_to(moved, "cpu", stream=7)
    if not mtsarray.backend_available("cuda"):
        with pytest.raises(mtsarray.Error, match="CUDA"):
            mtsarray.tensormap_to(moved, "cuda")
    released = numpy_tensor_map()
    released.release()
    with pytest.raises(ValueError):
        mtsarray.tensormap_to(released, "cpu")


def test_errors_reach_python_through_one_last_error():
    with pytest.raises(mtsarray.Error) as error:
        mtsarray.full((2,), 1.0).__dlpack__(stream=7)
    assert "mtsarray" in str(error.value)
    # metatensor's Python package reads the same thread-local error slot
    from metatensor._c_lib import _get_library
    message = ctypes.c_char_p()
    _get_library().mts_last_error(ctypes.byref(message), None, None)
    assert message.value.decode() == str(error.value)
