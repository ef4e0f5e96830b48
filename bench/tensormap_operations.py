#!/usr/bin/env python3
"""libmetatensor's operations on TensorMaps of mtsarray arrays, against the
same TensorMaps of NumPy arrays (metatensor-core's Python arrays), and of
PyTorch tensors (metatensor-torch) where metatensor-torch is importable.

The operations are keys_to_properties("neighbor_type"),
keys_to_samples("neighbor_type") and components_to_properties("xyz") on
descriptor-like TensorMaps: keys (center_type, neighbor_type), samples
(system, atom) -- the atoms of the center type but a few that have no
neighbor of that type, so that the merges leave holes --, an optional xyz
component, properties n. The mtsarray TensorMap is the NumPy one moved with
``mtsarray.tensormap_to`` (its values and labels are mtsarray arrays, on the
CPU and on the GPU when mtsarray can use one). Every result is compared,
block by block and value by value, with NumPy's.

The figures are the best of interleaved rounds (each call includes freeing
its result). Targets: mtsarray >= 1.2x NumPy on the CPU, and on the GPU
>= 1.0x metatensor-torch on the same GPU (when it is importable). The share
of the time spent in mtsarray's callbacks is measured by the C++ benchmark's
``metatensor operations`` rows (``mtsarray-bench --filter "metatensor
operations"``), which can see inside each callback.

Usage: python3 bench/tensormap_operations.py [--rounds R] [--smoke] [--json FILE]
"""

import argparse
import datetime
import json
import platform
import sys
import time

CPU_TARGET = 1.2
GPU_TARGET = 1.0

# (name, centers, neighbors, atoms per center, xyz components (0: none), properties)
SHAPES = [
    ("4 blocks 2x2, 5e3 atoms, 32 props", 2, 2, 5000, 0, 32),
    ("16 blocks 4x4, 2e4 atoms, xyz 3, 8 props", 4, 4, 20000, 3, 8),
    ("32 blocks 4x8, 2.5e4 atoms, 16 props", 4, 8, 25000, 0, 16),
]
SMOKE_SHAPES = [("4 blocks 2x2, 300 atoms, xyz 3, 4 props", 2, 2, 300, 3, 4)]
OPERATIONS = ["keys_to_properties", "keys_to_samples", "components_to_properties"]


def best_seconds(operations, rounds, batch_seconds=0.05):
    """Seconds per call of each operation: the best of `rounds` interleaved
    batches (each about batch_seconds). Other work on a shared machine only
    ever adds time."""
    counts = {}
    for name, operation in operations.items():
        start = time.perf_counter()
        operation()
        single = max(time.perf_counter() - start, 1e-6)
        counts[name] = max(1, int(batch_seconds / single))
    best = {name: float("inf") for name in operations}
    for _ in range(rounds):
        for name, operation in operations.items():
            start = time.perf_counter()
            for _ in range(counts[name]):
                operation()
            best[name] = min(best[name], (time.perf_counter() - start) / counts[name])
    return best


def numpy_tensor(np, metatensor, shape):
    _, centers, neighbors, atoms, components, properties = shape
    keys, blocks = [], []
    for center in range(centers):
        for neighbor in range(neighbors):
            atom = np.arange(atoms)
            atom = atom[(atom * 7 + neighbor * 3) % 11 != 0]
            samples = np.stack([atom // 64, atom], axis=1).astype(np.int32)
            value_shape = (len(atom),) + ((components,) if components else ()) + (properties,)
            values = (len(blocks) * 0.5 + (np.arange(np.prod(value_shape)) % 100003) * 0.25).reshape(value_shape)
            block = metatensor.TensorBlock(
                values=values,
                samples=metatensor.Labels(["system", "atom"], samples),
                components=[metatensor.Labels.range("xyz", components)] if components else [],
                properties=metatensor.Labels.range("n", properties),
            )
            keys.append([center, neighbor])
            blocks.append(block)
    return metatensor.TensorMap(metatensor.Labels(["center_type", "neighbor_type"],
                                                  np.array(keys, dtype=np.int32)), blocks)


def torch_tensor(torch, metatensor_torch, tensor, device):
    """The same TensorMap as metatensor-torch's, on `device`."""
    def labels(labels):
        return metatensor_torch.Labels(labels.names, torch.tensor(labels.values, dtype=torch.int32, device=device))

    blocks = []
    for block in tensor.blocks():
        blocks.append(metatensor_torch.TensorBlock(
            values=torch.tensor(block.values, device=device),
            samples=labels(block.samples),
            components=[labels(component) for component in block.components],
            properties=labels(block.properties),
        ))
    return metatensor_torch.TensorMap(labels(tensor.keys), blocks)


def run_operation(tensor, operation):
    if operation == "keys_to_properties":
        return tensor.keys_to_properties("neighbor_type")
    if operation == "keys_to_samples":
        return tensor.keys_to_samples("neighbor_type")
    return tensor.components_to_properties("xyz")


def host_values(np, mtsarray, tensor):
    """Every block's values of a result, as NumPy arrays on the host."""
    values = []
    for block in tensor.blocks():
        array = block.values
        if hasattr(array, "detach"):  # a torch tensor
            values.append(array.detach().cpu().numpy())
        elif isinstance(array, mtsarray.MtsArray):
            values.append(np.asarray(array if array.device == "cpu" else array.copy("cpu")))
        else:
            values.append(np.asarray(array))
    return values


def same_values(expected, actual):
    return len(expected) == len(actual) and all(
        e.shape == a.shape and (e == a).all() for e, a in zip(expected, actual))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--smoke", action="store_true", help="one small TensorMap, one round: checks values")
    parser.add_argument("--json", help="also write the results to this file")
    arguments = parser.parse_args()

    try:
        import numpy as np
        import metatensor
        import mtsarray
    except ImportError as error:
        print(f"tensormap_operations: skipped: {error} (pip install ./python)")
        return 0
    try:
        import torch
        import metatensor.torch as metatensor_torch
    except ImportError as error:
        torch, metatensor_torch, torch_missing = None, None, str(error)

    devices = ["cpu"] + (["cuda"] if mtsarray.backend_available("cuda") else [])
    print(f"tensormap_operations: mtsarray {mtsarray.__version__}, metatensor-core {metatensor.__version__}, "
          f"numpy {np.__version__}, metatensor-torch "
          f"{metatensor_torch.__version__ if metatensor_torch else 'not importable (' + torch_missing + ')'}, "
          f"Python {platform.python_version()}, devices: {', '.join(devices)}")
    print("time per call (the result freed), best of interleaved rounds; speedup = other / mtsarray")

    rounds = 1 if arguments.smoke else arguments.rounds
    rows, targets = [], []
    for shape in SMOKE_SHAPES if arguments.smoke else SHAPES:
        reference = numpy_tensor(np, metatensor, shape)
        for device in devices:
            ours = mtsarray.tensormap_to(reference, device)
            theirs = None
            if metatensor_torch is not None and (device == "cpu" or torch.cuda.is_available()):
                theirs = torch_tensor(torch, metatensor_torch, reference, device)
            print(f"\n== {shape[0]} on {device}")
            for operation in OPERATIONS:
                if operation == "components_to_properties" and not shape[4]:
                    continue
                expected = host_values(np, mtsarray, run_operation(reference, operation))
                candidates = {"mtsarray": ours}
                if device == "cpu":
                    candidates["numpy"] = reference
                if theirs is not None:
                    candidates["metatensor-torch"] = theirs
                for name, tensor in candidates.items():
                    if not same_values(expected, host_values(np, mtsarray, run_operation(tensor, operation))):
                        print(f"tensormap_operations: {operation} on {name} ({device}) differs from NumPy's")
                        return 1
                seconds = best_seconds({name: (lambda t=tensor: run_operation(t, operation))
                                        for name, tensor in candidates.items()}, rounds)
                row = {"shape": shape[0], "device": device, "operation": operation, "seconds": seconds}
                rows.append(row)
                text = f"  {operation:<26} mtsarray {seconds['mtsarray'] * 1e3:9.2f} ms"
                for other, target in (("numpy", CPU_TARGET), ("metatensor-torch", GPU_TARGET)):
                    if other not in seconds:
                        continue
                    speedup = seconds[other] / seconds["mtsarray"]
                    text += f"   {other} {seconds[other] * 1e3:9.2f} ms ({speedup:5.2f}x)"
                    if other == "numpy" or device != "cpu":
                        passed = speedup >= target
                        targets.append({"name": f"{operation} {shape[0]} {device}: >= {target}x {other}",
                                        "speedup": speedup, "pass": passed})
                        text += f" {'PASS' if passed else 'MISS'} >={target}x"
                print(text)
    if metatensor_torch is None:
        print("\n(metatensor-torch is not importable: the GPU target against it is not measured)")
    passes = sum(1 for target in targets if target["pass"])
    print(f"\n== targets: {passes} PASS, {len(targets) - passes} MISS")
    for target in targets:
        if not target["pass"]:
            print(f"   MISS {target['name']} ({target['speedup']:.2f}x)")
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "python": platform.python_version(), "rows": rows, "targets": targets}, file, indent=2)
        print(f"wrote {arguments.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
