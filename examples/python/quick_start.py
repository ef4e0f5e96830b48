#!/usr/bin/env python3
"""
Quick start in Python
=====================

The mtsarray Python package in five steps, with NumPy only: make arrays,
exchange them with NumPy through DLPack, move rows with ``move_data`` and a
movement plan, move a metatensor ``TensorMap`` to a device, and see what a
bad call raises. It needs NumPy and metatensor-core only (both come with the
package). Every value is checked: the script exits with a message if one is
wrong. ``pytest python/tests`` runs it, and CI runs it again in a fresh
virtual environment where only the built wheel is installed.

Usage: ``python3 examples/python/quick_start.py [--device cpu|auto]``;
``auto`` picks a CUDA GPU when mtsarray can use one, else the CPU.
"""

# %%
# The imports and the device
# --------------------------
#
# ``device`` is ``"cpu"``, or ``"cuda"`` with ``--device auto`` when
# :func:`mtsarray.backend_available` says mtsarray can use a CUDA GPU.

import sys

import metatensor
import numpy as np

import mtsarray

# "--device auto": a CUDA GPU when mtsarray can use one, else the CPU
auto = "auto" in sys.argv[1:]
device = "cuda" if auto and mtsarray.backend_available("cuda") else "cpu"
print(f"mtsarray {mtsarray.__version__} on {device}")

# %%
# 1. Arrays
# ---------
#
# :func:`mtsarray.zeros`, :func:`mtsarray.full`, and :func:`mtsarray.from_dlpack`
# for anything that speaks DLPack (NumPy, PyTorch, CuPy, JAX), zero-copy when
# the data is C-contiguous and writable.

# 1. Arrays: made by mtsarray, or imported zero-copy from NumPy (or
#    PyTorch, CuPy, JAX: anything with __dlpack__).
features = mtsarray.from_dlpack(np.arange(12.0).reshape(4, 3))  # row r: 3r, 3r + 1, 3r + 2
batch = mtsarray.zeros((2, 3), dtype="float64", device=device)
print(batch)

# %%
# 2. move_data
# ------------
#
# ``numpy.from_dlpack(batch, device="cpu")`` is a host consumer of the array:
# on a GPU it gets a copy once the queued work is done. A GPU consumer
# (``torch.from_dlpack``, ``cupy.from_dlpack``) gets the data zero-copy, its
# stream ordered after that work on the device.

# 2. move_data: rows 3 and 1 of `features` into rows 0 and 1 of `batch`.
#    Each movement is (sample_in, sample_out, properties_start_in,
#    properties_start_out, properties_length).
movements = np.array([[3, 0, 0, 0, 3], [1, 1, 0, 0, 3]], dtype=np.int64)
staged = features.copy(device)  # on the batch's device
batch.move_data(staged, movements)
on_host = np.from_dlpack(batch, device="cpu")  # waits for the copy, then reads
assert on_host.tolist() == [[9.0, 10.0, 11.0], [3.0, 4.0, 5.0]], on_host

# %%
# 3. A movement plan
# ------------------
#
# :class:`mtsarray.MovePlan` checks the movements once; each call is then one
# copy, queued on the output's stream.

# 3. A movement plan checks the movements once; calling it is one copy.
plan = mtsarray.MovePlan(batch, staged, movements)
for _ in range(3):
    plan(batch, staged)
assert np.array_equal(np.from_dlpack(batch, device="cpu"), on_host)

# %%
# 4. A TensorMap on a device
# --------------------------
#
# :func:`mtsarray.tensormap_to` moves a whole ``metatensor.TensorMap``,
# without PyTorch. The metatensor package then operates on it through the
# arrays' callbacks, on the device.

# 4. A whole metatensor TensorMap on the device, without PyTorch: values,
#    gradients, keys and labels become mtsarray arrays there.
block_values = np.arange(12.0).reshape(4, 3)
block = metatensor.TensorBlock(
    values=block_values,
    samples=metatensor.Labels.range("atom", 4),
    components=[],
    properties=metatensor.Labels.range("feature", 3),
)
tensor = metatensor.TensorMap(metatensor.Labels.range("key", 1), [block])  # owns the block
moved = mtsarray.tensormap_to(tensor, device)
values = moved.block(0).values
print(f"moved block: {values.shape} on {values.device}")
assert np.array_equal(np.from_dlpack(values, device="cpu"), block_values)

# %%
# 5. Errors
# ---------
#
# A bad call raises :class:`mtsarray.Error` with a message naming what was
# wrong, and leaves every array as it was.

# 5. A bad call raises, and leaves every array as it was.
try:
    batch.move_data(staged, np.array([[7, 0, 0, 0, 3]]))  # there is no row 7
except mtsarray.Error as error:
    print(f"as expected: {error}")
else:
    sys.exit("quick_start: an out-of-range movement was accepted")
assert np.array_equal(np.from_dlpack(batch, device="cpu"), on_host)

print("quick_start: every value is right")
