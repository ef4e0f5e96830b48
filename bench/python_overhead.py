#!/usr/bin/env python3
"""Host time of the mtsarray Python package's hot paths.

- DLPack in: ``mtsarray.from_dlpack(x)`` of a PyTorch tensor (CPU, and CUDA
  when available) and of a NumPy array;
- DLPack out: ``torch.from_dlpack(array)`` and ``numpy.from_dlpack(array)``;
- beside them, the same consumers on another producer (``torch.from_dlpack``
  of a NumPy array, ``numpy.from_dlpack`` of a NumPy array), so the figures
  read against what the frameworks themselves cost;
- a C consumer's hand-off of an MtsArray (python/tests/dlpack_exchange_consumer.c,
  compiled on the spot): through ``MtsArray.__dlpack_c_exchange_api__`` (DLPack
  1.3's C exchange API) and through ``__dlpack__`` and its capsule, side by
  side in the same rounds;
- ``MtsArray.move_data(input, movements)`` with an (N, 5) int64 NumPy array,
  against the same C move_data callback called from C++ in a loop
  (``mtsarray._mtsarray._time_move_data``, which reads the movements the same
  way): the difference is the Python overhead, for N = 1 .. 100 000 (it must
  not grow with N: no per-movement work in Python).

Targets: from_dlpack and the consumer's from_dlpack of an MtsArray <= 2 us
(with PyTorch; with NumPy where PyTorch is absent), move_data <= 1 us over the
C call. Each figure is the best of interleaved rounds of calibrated batches
(every call includes releasing what it made): on a shared machine, other work
only ever adds time.

Usage: python3 bench/python_overhead.py [--rounds R] [--json FILE]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

FROM_DLPACK_TARGET = 2e-6
MOVE_DATA_TARGET = 1e-6


def measure(operations, rounds, batch_seconds=0.01):
    """Seconds per call of each operation: the best of `rounds` interleaved
    batches (each calibrated to ~batch_seconds). The minimum is the estimator
    timeit recommends for host overheads: other work on a shared machine only
    ever adds time."""
    counts = {}
    for name, operation in operations.items():
        operation()
        start = time.perf_counter()
        for _ in range(100):
            operation()
        single = max((time.perf_counter() - start) / 100, 1e-9)
        counts[name] = max(1, int(batch_seconds / single))
    samples = {name: [] for name in operations}
    for _ in range(rounds):
        for name, operation in operations.items():
            count = counts[name]
            start = time.perf_counter()
            for _ in range(count):
                operation()
            samples[name].append((time.perf_counter() - start) / count)
    return {name: min(values) for name, values in samples.items()}


def microseconds(seconds):
    return f"{seconds * 1e6:8.3f} us"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (15)")
    parser.add_argument("--json", help="also write the results to this file")
    arguments = parser.parse_args()

    try:
        import mtsarray
        from mtsarray import _mtsarray
        import numpy as np
    except ImportError as error:
        print(f"python_overhead: skipped: {error} (pip install ./python)")
        return 0
    try:
        import torch
    except ImportError:
        torch = None

    cuda = torch is not None and torch.cuda.is_available() and mtsarray.backend_available("cuda")
    print(f"python_overhead: mtsarray {mtsarray.__version__}, numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else 'not installed'}, Python {platform.python_version()}, "
          f"{platform.processor() or platform.machine()}")
    print("host time per call, best of interleaved rounds")

    rows, targets = [], []

    def row(group, name, seconds, target=None, note=""):
        rows.append({"group": group, "name": name, "seconds": seconds, "target": target, "note": note})
        verdict = ""
        if target is not None:
            passed = seconds <= target
            targets.append({"name": f"{name} <= {target * 1e6:.0f} us", "seconds": seconds, "pass": passed})
            verdict = f"  {'PASS' if passed else 'MISS'} (<= {target * 1e6:.0f} us)"
        print(f"  {name:<62} {microseconds(seconds)}{verdict}{('  ' + note) if note else ''}")

    # ---- move_data (first: once PyTorch has run operations, its worker
    # threads keep spinning on the cores and slow every later row) -----------
    print("\n== move_data: MtsArray.move_data vs the C callback called from C++ (same arrays, same movements)")
    rng = np.random.default_rng(0)
    for count in [1, 100, 10_000, 100_000]:
        input = mtsarray.from_dlpack(rng.standard_normal((count, 4)))
        output = mtsarray.zeros((count, 4))
        movements = np.stack([rng.permutation(count), np.arange(count), np.zeros(count, dtype=np.int64),
                              np.zeros(count, dtype=np.int64), np.full(count, 4)], axis=1).astype(np.int64)
        # the Python method and the C loop, interleaved batches, best of each
        python_times, c_times = [], []
        calls = max(1, int(0.01 / max(_mtsarray._time_move_data(output, input, movements, 10), 1e-9)))
        for _ in range(arguments.rounds):
            start = time.perf_counter()
            for _ in range(calls):
                output.move_data(input, movements)
            python_times.append((time.perf_counter() - start) / calls)
            c_times.append(_mtsarray._time_move_data(output, input, movements, calls))
        python, c_time = min(python_times), min(c_times)
        overhead = python - c_time
        # run-to-run noise of the C call alone: where it exceeds the target,
        # the row can not resolve 1 us and gets no verdict (the overhead is a
        # constant: the small rows measure it)
        noise = statistics.median(c_times) - c_time
        resolvable = noise < MOVE_DATA_TARGET / 2
        note = f"(Python {microseconds(python).strip()}, C {microseconds(c_time).strip()}"
        note += ")" if resolvable else f"; noise {microseconds(noise).strip()}: no verdict)"
        row("move_data", f"move_data overhead, {count} movements", overhead,
            MOVE_DATA_TARGET if resolvable else None, note=note)

    # ---- DLPack ------------------------------------------------------------------
    numpy_values = np.zeros((1000, 8))
    array = mtsarray.zeros((1000, 8))
    operations = {
        "mtsarray.from_dlpack(numpy array)": lambda: mtsarray.from_dlpack(numpy_values),
        "numpy.from_dlpack(MtsArray)": lambda: np.from_dlpack(array),
        "numpy.from_dlpack(numpy array)": lambda: np.from_dlpack(numpy_values),
    }
    devices = []
    if torch is not None:
        devices.append("cpu")
        if cuda:
            devices.append("cuda")
        for device in devices:
            tensor = torch.zeros((1000, 8), dtype=torch.float64, device=device)
            on_device = mtsarray.zeros((1000, 8), device=device)
            if device == "cuda":
                torch.cuda.synchronize()
            operations[f"mtsarray.from_dlpack(torch tensor, {device})"] = (lambda t=tensor: mtsarray.from_dlpack(t))
            operations[f"torch.from_dlpack(MtsArray, {device})"] = (lambda a=on_device: torch.from_dlpack(a))
        operations["torch.from_dlpack(numpy array)"] = lambda: torch.from_dlpack(numpy_values)
    times = measure(operations, arguments.rounds)

    print("\n== DLPack")
    with_torch = torch is not None
    for name, seconds in times.items():
        target = None
        if name.startswith("mtsarray.from_dlpack(torch") or name.startswith("torch.from_dlpack(MtsArray"):
            target = FROM_DLPACK_TARGET
        elif not with_torch and name in ("mtsarray.from_dlpack(numpy array)", "numpy.from_dlpack(MtsArray)"):
            target = FROM_DLPACK_TARGET
        row("dlpack", name, seconds, target)
    if not with_torch:
        print("  (PyTorch is not installed: the targets apply to the NumPy rows)")

    # ---- a C consumer's hand-off of an MtsArray: the C exchange API against
    # __dlpack__ and its capsule, in the same process, interleaved ----------
    print("\n== a C consumer takes an MtsArray and releases it: __dlpack_c_exchange_api__ vs __dlpack__")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
    import exchange_consumer

    consumer, reason = exchange_consumer.load()
    if consumer is None:
        print(f"  skipped: {reason}")
    else:
        exported = mtsarray.zeros((1000, 8))
        calls = 20_000
        through_api, through_dlpack = [], []
        for _ in range(arguments.rounds):
            through_api.append(consumer.consumer_time(exported, calls, 1))
            through_dlpack.append(consumer.consumer_time(exported, calls, 0))
        api_seconds, dlpack_seconds = min(through_api), min(through_dlpack)
        row("exchange", "managed_tensor_from_py_object_no_sync + deleter (C)", api_seconds)
        row("exchange", "__dlpack__(max_version=(1, 3)) + capsule + deleter (C)", dlpack_seconds,
            note=f"({dlpack_seconds / api_seconds:.1f}x the exchange API)")

    passes = sum(1 for target in targets if target["pass"])
    print(f"\n== targets: {passes} PASS, {len(targets) - passes} MISS")
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "mtsarray": mtsarray.__version__, "numpy": np.__version__,
                       "torch": torch.__version__ if torch else None, "machine": platform.machine(),
                       "rows": rows, "targets": targets}, file, indent=2)
        print(f"wrote {arguments.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
