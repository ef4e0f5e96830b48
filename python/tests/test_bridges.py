"""TensorMaps crossing between mtsarray and NumPy / PyTorch without a copy
(mtsarray.tensormap_as), metatensor-operations on the bridged maps, and
metatensor-torch (mtsarray.to_metatensor_torch).

Every operation on a bridged map is checked against the same operation on
the original NumPy map; memory sharing is shown by writing through one side
and reading through the other. PyTorch, metatensor-torch and GPU cases skip
with the reason where those are missing.
"""

import ctypes
import gc

import pytest
from conftest import optional, require
from test_metatensor import expected_values, numpy_tensor_map

np = require("numpy")
metatensor = require("metatensor")
operations = require("metatensor.operations")
mtsarray = require("mtsarray")
torch = optional("torch")
metatensor_torch = optional("metatensor.torch") if torch is not None else None

from metatensor import Labels, TensorBlock, TensorMap  # noqa: E402

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_metatensor_torch = pytest.mark.skipif(metatensor_torch is None,
                                            reason="metatensor-torch (and torch) are not installed")
CUDA_SKIP = (
    "torch is not installed" if torch is None
    else f"the mtsarray CUDA backend is not usable: {mtsarray.backend_unavailable_reason('cuda')}"
    if not mtsarray.backend_available("cuda")
    else "torch sees no CUDA device" if not torch.cuda.is_available() or torch.version.cuda is None
    else None
)
needs_torch_cuda = pytest.mark.skipif(CUDA_SKIP is not None, reason=str(CUDA_SKIP))


def moved_to(device="cpu"):
    return mtsarray.tensormap_to(numpy_tensor_map(), device)


def every_values(tensor):
    """(where, values) of every block and gradient, in order."""
    for index, block in enumerate(tensor.blocks()):
        yield f"block {index}", block.values
        for parameter in block.gradients_list():
            yield f"block {index} {parameter}", block.gradient(parameter).values


def address(values):
    """Where the data of a NumPy array, a torch tensor or an MtsArray starts."""
    if isinstance(values, np.ndarray):
        return values.ctypes.data
    if isinstance(values, mtsarray.MtsArray):
        return values.data_ptr
    return values.data_ptr()


def as_numpy(tensor):
    """A TensorMap of NumPy arrays on the host, whatever its arrays."""
    if isinstance(tensor.block(0).values, np.ndarray):
        return tensor
    return tensor.to("cpu").to(arrays="numpy")


# ---- the operations of metatensor-operations -------------------------------

ATOMS_0_AND_1 = Labels(["atom"], np.array([[0], [1]], dtype=np.int32))

# (name, f(tensor) -> TensorMap or bool): what a metatensor user does first
OPERATIONS = [
    ("add", lambda t: operations.add(t, t)),
    ("multiply", lambda t: operations.multiply(t, 2.0)),
    ("abs", lambda t: operations.abs(operations.multiply(t, -1.0))),
    ("sum_over_samples", lambda t: operations.sum_over_samples(t, "atom")),
    ("mean_over_samples", lambda t: operations.mean_over_samples(t, "atom")),
    ("slice", lambda t: operations.slice(t, "samples", ATOMS_0_AND_1)),
    ("remove_gradients", lambda t: operations.remove_gradients(t)),
    ("allclose", lambda t: operations.allclose(t, t)),
    ("to(arrays='numpy')", lambda t: t.to(arrays="numpy")),
]


@pytest.mark.parametrize("name, operation", OPERATIONS, ids=[name for name, _ in OPERATIONS])
def test_operations_on_maps_bridged_to_numpy(name, operation):
    bridged = mtsarray.tensormap_as(moved_to("cpu"), arrays="numpy")
    result = operation(bridged)
    expected = operation(numpy_tensor_map())
    if isinstance(expected, bool):
        assert result is expected is True
        return
    assert isinstance(result.block(0).values, np.ndarray)
    assert operations.equal(result, expected), f"{name} on the bridged map differs from NumPy's"


def test_operation_results_by_hand():
    # the same figures without metatensor-operations on both sides
    bridged = mtsarray.tensormap_as(moved_to("cpu"), arrays="numpy")
    for key, n_samples in [(1, 3), (6, 2)]:
        values = expected_values(key, n_samples)
        added = operations.add(bridged, bridged).block(center_type=key)
        np.testing.assert_array_equal(added.values, 2 * values)
        np.testing.assert_array_equal(added.gradient("positions").values, np.full((n_samples, 3, 2), -2.0 * key))
        summed = operations.sum_over_samples(bridged, "atom").block(center_type=key)
        np.testing.assert_array_equal(summed.values, values.sum(axis=0, keepdims=True))
        sliced = operations.slice(bridged, "samples", ATOMS_0_AND_1).block(center_type=key)
        np.testing.assert_array_equal(sliced.values, values[:2])


def test_torch_to_without_torch_says_so():
    if torch is not None:
        pytest.skip("torch is installed: test_operations_on_maps_bridged_to_torch covers to(arrays='torch')")
    bridged = mtsarray.tensormap_as(moved_to("cpu"), arrays="numpy")
    with pytest.raises(ModuleNotFoundError, match="PyTorch"):
        bridged.to(arrays="torch")
    with pytest.raises(ModuleNotFoundError, match="PyTorch"):
        mtsarray.tensormap_as(moved_to("cpu"), arrays="torch")


def _atoms_0_and_1_beside(tensor):
    """ATOMS_0_AND_1 on the device of the map's labels: metatensor selects
    only with labels on the same device as the ones selected from."""
    if isinstance(tensor.device, str):  # NumPy arrays, on the CPU
        return ATOMS_0_AND_1
    return Labels(["atom"], torch.tensor([[0], [1]], dtype=torch.int32, device=tensor.device))


# on PyTorch maps, which may be on a GPU: a selection goes where the labels
# are, and NumPy arrays come from the CPU (metatensor does not move a CUDA
# tensor to the host on its own, as PyTorch's .numpy() does not)
ON_TORCH_MAPS = {
    "slice": lambda t: operations.slice(t, "samples", _atoms_0_and_1_beside(t)),
    "to(arrays='numpy')": lambda t: t.to(device="cpu").to(arrays="numpy"),
}
TORCH_OPERATIONS = [(name, ON_TORCH_MAPS.get(name, operation)) for name, operation in OPERATIONS]
TORCH_OPERATIONS += [("to(arrays='torch')", lambda t: t.to(arrays="torch"))]


def _operations_on_torch(device, name, operation):
    bridged = mtsarray.tensormap_as(moved_to(device), arrays="torch")
    assert all(isinstance(values, torch.Tensor) and values.device.type == device
               for _, values in every_values(bridged))
    result = operation(bridged)
    expected = operation(numpy_tensor_map())
    if isinstance(expected, bool):
        assert result is expected is True
        return
    kind = np.ndarray if name == "to(arrays='numpy')" else torch.Tensor
    assert all(isinstance(values, kind) for _, values in every_values(result))
    # float64 sums may be ordered differently by PyTorch: equal to 1e-12
    assert operations.allclose(as_numpy(result), as_numpy(expected), rtol=1e-12, atol=0.0), \
        f"{name} on the torch-bridged map differs from NumPy's"


@needs_torch
@pytest.mark.parametrize("name, operation", TORCH_OPERATIONS, ids=[name for name, _ in TORCH_OPERATIONS])
def test_operations_on_maps_bridged_to_torch(name, operation):
    _operations_on_torch("cpu", name, operation)


@needs_torch_cuda
@pytest.mark.parametrize("name, operation", TORCH_OPERATIONS, ids=[name for name, _ in TORCH_OPERATIONS])
def test_operations_on_cuda_maps_bridged_to_torch(name, operation):
    _operations_on_torch("cuda", name, operation)


# ---- one memory, two sides ---------------------------------------------------

def test_numpy_views_share_the_mtsarray_memory():
    moved = moved_to("cpu")
    bridged = mtsarray.tensormap_as(moved, arrays="numpy")
    assert bridged.keys == moved.keys and bridged.get_info("units") == "eV"
    for (where, ours), (_, theirs) in zip(every_values(moved), every_values(bridged)):
        assert isinstance(theirs, np.ndarray) and theirs.flags.writeable, where
        assert address(theirs) == address(ours), f"{where} was copied"
    for key, n_samples in [(1, 3), (6, 2)]:
        ours, theirs = moved.block(center_type=key), bridged.block(center_type=key)
        assert theirs.samples == ours.samples and theirs.properties == ours.properties
        assert theirs.components == ours.components
        assert theirs.gradient("positions").samples == ours.gradient("positions").samples
        np.testing.assert_array_equal(theirs.values, expected_values(key, n_samples))

    # NumPy writes, mtsarray reads ...
    bridged.block(0).values[1, 2, 1] = -7.5
    bridged.block(1).gradient("positions").values[0, 0, 0] = 99.0
    assert np.asarray(moved.block(0).values)[1, 2, 1] == -7.5
    assert np.asarray(moved.block(1).gradient("positions").values)[0, 0, 0] == 99.0
    # ... mtsarray writes (move_data into the block), NumPy reads
    moved.block(1).values.move_data(mtsarray.full((1, 3, 2), 0.25), [[0, 1, 0, 0, 2]])
    np.testing.assert_array_equal(bridged.block(1).values[1], np.full((3, 2), 0.25))


def test_numpy_views_outlive_the_mtsarray_map():
    bridged = mtsarray.tensormap_as(moved_to("cpu"), arrays="numpy")
    gc.collect()
    np.testing.assert_array_equal(bridged.block(1).values, expected_values(6, 2))
    values = bridged.block(0).values
    del bridged
    gc.collect()
    np.testing.assert_array_equal(values, expected_values(1, 3))


def test_numpy_maps_into_mtsarray_without_a_copy():
    original = numpy_tensor_map()
    back = mtsarray.tensormap_as(original, arrays="mtsarray")
    for (where, theirs), (_, ours) in zip(every_values(original), every_values(back)):
        assert isinstance(ours, mtsarray.MtsArray), where
        assert address(ours) == address(theirs), f"{where} was copied"
    # mtsarray writes, NumPy reads; NumPy writes, mtsarray reads
    back.block(0).values.move_data(mtsarray.full((1, 3, 2), -1.0), [[0, 2, 0, 0, 2]])
    np.testing.assert_array_equal(original.block(0).values[2], np.full((3, 2), -1.0))
    original.block(1).values[0, 0, 0] = 123.0
    assert np.asarray(back.block(1).values)[0, 0, 0] == 123.0
    # labels and info came along; the metatensor package works on the result
    assert back.keys == original.keys and back.get_info("units") == "eV"
    assert back.block(1).samples == original.block(1).samples
    merged = back.keys_to_properties("center_type").block()
    assert isinstance(merged.values, mtsarray.MtsArray)
    np.testing.assert_array_equal(np.asarray(merged.values)[:2, :, 2:4], original.block(1).values)


def test_round_trips_keep_one_memory():
    moved = moved_to("cpu")
    again = mtsarray.tensormap_as(mtsarray.tensormap_as(moved, arrays="numpy"), arrays="mtsarray")
    for (where, first), (_, second) in zip(every_values(moved), every_values(again)):
        assert address(first) == address(second), where
    # an operation's result comes back too, and moves on with mtsarray
    doubled = mtsarray.tensormap_as(operations.add(mtsarray.tensormap_as(moved, arrays="numpy"),
                                                   mtsarray.tensormap_as(moved, arrays="numpy")), arrays="mtsarray")
    np.testing.assert_array_equal(np.asarray(mtsarray.tensormap_to(doubled, "cpu").block(1).values),
                                  2 * np.asarray(moved.block(1).values))


def test_memory_that_can_not_be_shared_is_copied():
    values = np.arange(24.0).reshape(2, 3, 4)
    strided = values[:, :, ::2]  # every other property: not C-contiguous
    read_only = np.arange(24.0).reshape(4, 3, 2)
    read_only.flags.writeable = False
    tensor = TensorMap(Labels.range("key", 2), [
        TensorBlock(strided, Labels.range("s", 2), [Labels.range("c", 3)], Labels.range("p", 2)),
        TensorBlock(read_only, Labels.range("s", 4), [Labels.range("c", 3)], Labels.range("p", 2)),
    ])
    back = mtsarray.tensormap_as(tensor, arrays="mtsarray")
    for index, source in enumerate([strided, read_only]):
        ours = back.block(index).values
        assert ours.data_ptr != address(source)
        np.testing.assert_array_equal(np.asarray(ours), source)
    back.block(0).values.move_data(mtsarray.full((1, 3, 2), 0.0), [[0, 0, 0, 0, 2]])
    assert values[0, 0, 0] == 0.0 and values[0, 0, 2] == 2.0  # the copy is its own


def test_empty_blocks_and_blocks_without_components():
    tensor = TensorMap(Labels.range("key", 2), [
        TensorBlock(np.zeros((0, 4)), Labels.empty("s"), [], Labels.range("p", 4)),
        TensorBlock(np.arange(6.0).reshape(3, 2), Labels.range("s", 3), [], Labels.range("p", 2)),
    ])
    back = mtsarray.tensormap_as(tensor, arrays="mtsarray")
    assert back.block(0).values.shape == (0, 4)
    bridged = mtsarray.tensormap_as(back, arrays="numpy")
    assert bridged.block(0).values.shape == (0, 4)
    assert operations.equal(bridged, tensor)
    assert address(bridged.block(1).values) == address(tensor.block(1).values)


# ---- errors ----------------------------------------------------------------

def test_errors():
    moved = moved_to("cpu")
    with pytest.raises(TypeError, match="expected a metatensor.TensorMap"):
        mtsarray.tensormap_as(moved.block(0), arrays="numpy")
    with pytest.raises(TypeError, match="expected a metatensor.TensorMap"):
        mtsarray.tensormap_as(np.zeros((2, 2)), arrays="mtsarray")
    with pytest.raises(ValueError, match="arrays must be one of"):
        mtsarray.tensormap_as(moved, arrays="jax")
    with pytest.raises(ValueError, match="stream is for arrays='mtsarray'"):
        mtsarray.tensormap_as(moved, arrays="numpy", stream=-1)
    # NumPy maps are metatensor's to convert (TensorMap.to)
    with pytest.raises(TypeError, match="numpy.ndarray, not mtsarray arrays"):
        mtsarray.tensormap_as(numpy_tensor_map(), arrays="numpy")
    with pytest.raises(mtsarray.Error, match="no streams"):
        mtsarray.tensormap_as(numpy_tensor_map(), arrays="mtsarray", stream=5)


def _not_exported_by_numpy():
    """dtypes NumPy's __dlpack__ refuses: the other byte order, and the
    long double where it is wider than a double (x86's 80-bit one)."""
    dtypes = [np.dtype(np.float64).newbyteorder(), np.dtype(np.int32).newbyteorder()]
    if np.dtype(np.longdouble).itemsize > np.dtype(np.float64).itemsize:
        dtypes += [np.dtype(np.longdouble), np.dtype(np.clongdouble)]
    return dtypes


@pytest.mark.parametrize("dtype", _not_exported_by_numpy(), ids=str)
def test_values_numpy_can_not_export_are_a_value_error(dtype):
    tensor = TensorMap(Labels.range("key", 1), [
        TensorBlock(np.zeros((2, 2), dtype=dtype), Labels.range("s", 2), [], Labels.range("p", 2)),
    ])
    with pytest.raises(ValueError, match="NumPy can not export"):
        mtsarray.tensormap_as(tensor, arrays="mtsarray")


def test_a_failed_conversion_leaves_nothing_behind():
    # the second block's values can not cross DLPack (not in the machine's
    # byte order): no array is made, and the source is what it was
    first = np.arange(6.0).reshape(3, 2)
    tensor = TensorMap(Labels.range("key", 2), [
        TensorBlock(first, Labels.range("s", 3), [], Labels.range("p", 2)),
        TensorBlock(np.zeros((2, 2), dtype=np.dtype(np.float64).newbyteorder()), Labels.range("s", 2), [],
                    Labels.range("p", 2)),
    ])
    references = _references(first)
    with pytest.raises(ValueError, match="byte order"):
        mtsarray.tensormap_as(tensor, arrays="mtsarray")
    gc.collect()
    assert _references(first) == references  # no import of `first` left alive
    np.testing.assert_array_equal(tensor.block(0).values, np.arange(6.0).reshape(3, 2))


def _references(array):
    return ctypes.c_ssize_t.from_address(id(array)).value


@needs_torch
def test_tensors_requiring_grad_are_refused():
    tensor = numpy_tensor_map().to(arrays="torch")
    tensor.block(0).values.requires_grad_(True)
    with pytest.raises(ValueError, match="require grad.*detach"):
        mtsarray.tensormap_as(tensor, arrays="mtsarray")


@needs_torch_cuda
def test_cuda_maps_are_not_numpy_maps():
    with pytest.raises(ValueError, match="NumPy reads host memory only"):
        mtsarray.tensormap_as(moved_to("cuda"), arrays="numpy")


# ---- PyTorch ------------------------------------------------------------------

def _torch_views_share_memory(device):
    moved = moved_to(device)
    bridged = mtsarray.tensormap_as(moved, arrays="torch")
    for (where, ours), (_, theirs) in zip(every_values(moved), every_values(bridged)):
        assert isinstance(theirs, torch.Tensor) and theirs.device.type == device, where
        assert address(theirs) == address(ours), f"{where} was copied"
    assert bridged.keys.values.device.type == device
    bridged.block(0).values[1, 2, 1] = -7.5  # torch writes, mtsarray reads
    assert np.asarray(moved.block(0).values.copy("cpu"))[1, 2, 1] == -7.5
    moved.block(1).values.move_data(mtsarray.full((1, 3, 2), 0.25, device=device), [[0, 1, 0, 0, 2]])
    torch.testing.assert_close(bridged.block(1).values[1].cpu(), torch.full((3, 2), 0.25, dtype=torch.float64))
    back = mtsarray.tensormap_as(bridged, arrays="mtsarray")  # and back, zero-copy
    for (where, ours), (_, again) in zip(every_values(moved), every_values(back)):
        assert address(again) == address(ours), where


@needs_torch
def test_torch_views_share_the_mtsarray_memory():
    _torch_views_share_memory("cpu")


@needs_torch_cuda
def test_torch_cuda_views_share_the_mtsarray_memory():
    _torch_views_share_memory("cuda")


@needs_torch_cuda
def test_torch_cuda_views_are_ordered_after_the_pending_work():
    # the map works on its own stream, busy behind a slow kernel; the bridge
    # returns at once and PyTorch, on another stream, reads the new values
    work = torch.cuda.Stream()
    reader = torch.cuda.Stream()
    rows = 1 << 16
    tensor = TensorMap(Labels.range("key", 1), [
        TensorBlock(np.zeros((rows, 4)), Labels.range("s", rows), [], Labels.range("p", 4)),
    ])
    moved = mtsarray.tensormap_to(tensor, "cuda", stream=work)
    source = mtsarray.full((rows, 4), 3.0, device="cuda")
    source.stream = work
    every_row = np.arange(rows, dtype=np.int64)
    movements = np.stack([every_row, every_row, 0 * every_row, 0 * every_row, 0 * every_row + 4], axis=1)
    torch.cuda.synchronize()
    with torch.cuda.stream(work):
        torch.cuda._sleep(200_000_000)
    moved.block(0).values.move_data(source, movements)  # behind the sleep
    with torch.cuda.stream(reader):
        bridged = mtsarray.tensormap_as(moved, arrays="torch")
        assert not work.query(), "the bridge waited for the map's stream"
        total = bridged.block(0).values.sum().item()  # on the reader stream
    assert total == 3.0 * 4 * rows


# ---- metatensor-torch -------------------------------------------------------------

def _metatensor_torch_map(device):
    moved = moved_to(device)
    model_input = mtsarray.to_metatensor_torch(moved)
    assert isinstance(model_input, torch.ScriptObject)
    for (where, ours), (_, theirs) in zip(every_values(moved), every_values(model_input)):
        assert isinstance(theirs, torch.Tensor) and theirs.device.type == device, where
        assert address(theirs) == address(ours), f"{where} was copied"
    assert model_input.keys.values.device.type == device
    assert model_input.get_info("units") == "eV"
    return moved, model_input


if metatensor_torch is not None:
    @torch.jit.script
    def _model(tensor: metatensor_torch.TensorMap) -> torch.Tensor:
        # a TorchScript function over a metatensor.torch.TensorMap, as a model is
        total = torch.zeros(1, dtype=torch.float64, device=tensor.keys.values.device)
        for block in tensor.blocks():
            total = total + block.values.sum() + block.gradient("positions").values.sum()
        return total


def _metatensor_torch_bridge(device):
    moved, model_input = _metatensor_torch_map(device)
    expected = sum(expected_values(key, n).sum() - key * n * 6 for key, n in [(1, 3), (6, 2)])
    assert _model(model_input).item() == expected
    model_input.block(0).values[0, 0, 0] = 0.5  # written through torch, read by mtsarray
    assert np.asarray(moved.block(0).values.copy("cpu"))[0, 0, 0] == 0.5
    back = mtsarray.tensormap_as(model_input, arrays="mtsarray")  # a model's output comes back
    for (where, ours), (_, again) in zip(every_values(moved), every_values(back)):
        assert address(again) == address(ours), where
    assert back.get_info("units") == "eV"


@needs_metatensor_torch
def test_metatensor_torch_bridge():
    _metatensor_torch_bridge("cpu")


@needs_torch_cuda
@needs_metatensor_torch
def test_metatensor_torch_bridge_on_cuda():
    _metatensor_torch_bridge("cuda")


def test_metatensor_torch_missing_says_so():
    if metatensor_torch is not None:
        pytest.skip("metatensor-torch is installed: test_metatensor_torch_bridge runs")
    with pytest.raises(ModuleNotFoundError, match="PyTorch|metatensor-torch"):
        mtsarray.to_metatensor_torch(moved_to("cpu"))
