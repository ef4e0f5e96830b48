"""
TensorMaps between mtsarray, NumPy and PyTorch
==============================================

A TensorMap of mtsarray arrays is moved to a device with
``mtsarray.tensormap_to``, handed to metatensor-operations as NumPy arrays
(or torch tensors) that view the mtsarray memory, and the results come back
as mtsarray arrays, all without copying a value. Every step checks its values
and that the memory is shared. With PyTorch (and metatensor-torch) installed,
the same map goes to torch and to a metatensor-torch TensorMap, on a CUDA
GPU when there is one (``--device cpu`` stays on the CPU).

Usage: ``python examples/python/tensormap_bridges.py [--device cpu|auto]``
"""

# [setup]
import argparse
import importlib.util
import sys

import metatensor
import metatensor.operations as operations
import numpy as np
from metatensor import Labels, TensorBlock, TensorMap

import mtsarray


def make_tensor() -> TensorMap:
    """Two blocks of NumPy values [samples, 3, 4], each with a gradient."""
    blocks = []
    for center_type, n_atoms in [(1, 5), (8, 3)]:
        values = np.arange(n_atoms * 12, dtype=np.float64).reshape(n_atoms, 3, 4)
        values += center_type
        atoms = np.arange(n_atoms, dtype=np.int32)
        block = TensorBlock(
            values=values,
            samples=Labels(["atom"], atoms.reshape(-1, 1)),
            components=[Labels.range("xyz", 3)],
            properties=Labels.range("n", 4),
        )
        block.add_gradient("positions", TensorBlock(
            values=-values,
            samples=Labels(["sample", "atom"], np.repeat(atoms, 2).reshape(-1, 2)),
            components=[Labels.range("xyz", 3)],
            properties=Labels.range("n", 4),
        ))
        blocks.append(block)
    keys = Labels(["center_type"], np.array([[1], [8]], dtype=np.int32))
    return TensorMap(keys, blocks)


# [setup]
def main() -> None:
    parser = argparse.ArgumentParser(description="TensorMaps between mtsarray, NumPy and PyTorch, no copy")
    parser.add_argument("--device", default="auto", choices=["cpu", "auto"])
    parser.parse_args()

    # [move]
    tensor = make_tensor()  # two blocks of NumPy values, with gradients
    # mtsarray arrays on the CPU (the GPU part below moves them to CUDA)
    moved = mtsarray.tensormap_to(tensor, "cpu")
    # NumPy arrays that view the mtsarray memory: no value is copied
    as_numpy = mtsarray.tensormap_as(moved, arrays="numpy")
    # [move]

    # [operations]
    # metatensor-operations work on the NumPy views
    total = operations.sum_over_samples(operations.multiply(as_numpy, 2.0), "atom")
    expected = operations.sum_over_samples(operations.multiply(tensor, 2.0), "atom")
    assert operations.allclose(total, expected)
    # a write through NumPy is a write into the mtsarray array
    as_numpy.block(0).values[0, 0, 0] = 42.0
    assert np.asarray(moved.block(0).values)[0, 0, 0] == 42.0
    # [operations]

    # [back]
    # and back: the results become mtsarray arrays, again without a copy
    back = mtsarray.tensormap_as(total, arrays="mtsarray")
    assert isinstance(back.block(0).values, mtsarray.MtsArray)
    assert np.asarray(back.block(0).values).ctypes.data == total.block(0).values.ctypes.data
    # [back]
    print("tensormap_bridges: NumPy and metatensor-operations: every value is right, no copy")

    if importlib.util.find_spec("torch") is None:
        print("tensormap_bridges: PyTorch is not installed: the torch part is skipped")
        return
    # [torch]
    import torch

    # a CUDA GPU when PyTorch and mtsarray can both use one
    on_gpu = torch.cuda.is_available() and mtsarray.backend_available("cuda")
    device = "cuda" if on_gpu and sys.argv[1:] != ["--device", "cpu"] else "cpu"
    on_device = mtsarray.tensormap_to(tensor, device)
    # torch tensors on the same device, ordered after the work queued on the
    # mtsarray arrays (on a GPU: PyTorch's current stream waits for it)
    as_torch = mtsarray.tensormap_as(on_device, arrays="torch")
    doubled = operations.add(as_torch, as_torch)
    reference = torch.from_numpy(tensor.block(1).values).to(device)
    assert torch.equal(doubled.block(1).values, 2 * reference)
    # [torch]
    print(f"tensormap_bridges: PyTorch on {device}: every value is right, no copy")

    try:
        import metatensor.torch  # noqa: F401
    except ImportError:
        print("tensormap_bridges: metatensor-torch is not installed: the model part is skipped")
        return
    # [metatensor-torch]
    # a metatensor.torch.TensorMap whose values view the mtsarray memory, for a model
    for_model = mtsarray.to_metatensor_torch(on_device)
    assert for_model._type().qualified_name() == "__torch__.torch.classes.metatensor.TensorMap"
    assert for_model.block(0).values.data_ptr() == as_torch.block(0).values.data_ptr()
    # [metatensor-torch]
    print(f"tensormap_bridges: metatensor-torch on {device}: every value is right, no copy")


if __name__ == "__main__":
    main()
