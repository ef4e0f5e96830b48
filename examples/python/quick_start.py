#!/usr/bin/env python3
"""The mtsarray Python package in five steps, with NumPy only.

Make arrays, exchange them with NumPy through DLPack, move rows with
move_data and a movement plan, move a metatensor TensorMap to a device, and
see what a bad call raises. Every value is checked; the script exits with a
message if one is wrong.

Usage: python3 examples/python/quick_start.py [--device cpu|auto]
    auto picks a CUDA GPU when mtsarray can use one, else the CPU.
"""

import argparse
import sys

import metatensor
import numpy as np

import mtsarray


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "auto"], default="cpu")
    device = "cuda" if parser.parse_args().device == "auto" and mtsarray.backend_available("cuda") else "cpu"
    print(f"mtsarray {mtsarray.__version__} on {device}")

    # [step 1]
    # 1. Arrays: made by mtsarray, or imported zero-copy from NumPy (or
    #    PyTorch, CuPy, JAX: anything with __dlpack__).
    features = mtsarray.from_dlpack(np.arange(12.0).reshape(4, 3))  # row r: 3r, 3r + 1, 3r + 2
    batch = mtsarray.zeros((2, 3), dtype="float64", device=device)
    print(batch)
    # [step 1]

    # [step 2]
    # 2. move_data: rows 3 and 1 of `features` into rows 0 and 1 of `batch`.
    #    Each movement is (sample_in, sample_out, properties_start_in,
    #    properties_start_out, properties_length).
    movements = np.array([[3, 0, 0, 0, 3], [1, 1, 0, 0, 3]], dtype=np.int64)
    staged = features.copy(device)  # on the batch's device
    batch.move_data(staged, movements)
    on_host = np.from_dlpack(batch, device="cpu")  # waits for the copy, then reads
    assert on_host.tolist() == [[9.0, 10.0, 11.0], [3.0, 4.0, 5.0]], on_host
    # [step 2]

    # [step 3]
    # 3. A movement plan checks the movements once; calling it is one copy.
    plan = mtsarray.MovePlan(batch, staged, movements)
    for _ in range(3):
        plan(batch, staged)
    assert np.array_equal(np.from_dlpack(batch, device="cpu"), on_host)
    # [step 3]

    # [step 4]
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
    # [step 4]

    # [step 5]
    # 5. A bad call raises, and leaves every array as it was.
    try:
        batch.move_data(staged, np.array([[7, 0, 0, 0, 3]]))  # there is no row 7
    except mtsarray.Error as error:
        print(f"as expected: {error}")
    else:
        sys.exit("quick_start: an out-of-range movement was accepted")
    assert np.array_equal(np.from_dlpack(batch, device="cpu"), on_host)
    # [step 5]

    print("quick_start: every value is right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
