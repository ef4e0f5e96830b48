#!/usr/bin/env python3
"""move_data next to PyTorch, in one process, on the same data (bench/README.md).

For two of the GPU move_data cases -- 100 000 scattered movements with differing
property ranges, and 100 000 scattered movements sharing one property range --
this times, interleaved and on the same tensors:

  (a) mtsarray's move_data, through the `mtsarray` Python package
      (python/): MtsArray.move_data with the (N, 5) int64 host movement
      array, on arrays imported zero-copy from the torch tensors
      (mtsarray.from_dlpack) that work on torch's stream;
  (b) metatensor-torch's path for differing ranges: one `output[s_out, ...,
      p_out:p_out+n] = input[s_in, ..., p_in:p_in+n]` (an index_put_) per
      movement, as a Python loop and as a TorchScript loop (closer to
      metatensor-torch's C++ loop: less interpreter overhead per movement);
  (c) metatensor-torch's vectorised path for a shared range, as its
      TorchDataArray::move_data runs it on every call: int64 index tensors
      built on the CPU from the (N, 5) host movement list, uploaded with
      non_blocking=False, then `index_select` + `index_put_` on the
      property slices (metatensor-torch builds the indices with a C++ loop
      over the movements and checks them for consecutive samples; here a
      column copy stands in for both, which favours PyTorch);
  (d) for reference, the same vectorised PyTorch operations on index
      tensors already on the device (what a caller that keeps its indices
      on the GPU pays); for differing ranges, on flat element indices (the
      best PyTorch can do without a kernel of its own).

Every time is end to end (host time until the stream is done), the median of
interleaved rounds. Every implementation's result is checked against a
reference before anything is timed. Targets (bench/README.md, Targets): mtsarray
>= 1000x faster than one index_put_ per movement (differing ranges), >= 3x
faster than metatensor-torch's vectorised path end to end (shared range),
on CUDA; the CPU rows show the same ratios without a verdict.

Runs on CUDA when torch sees a GPU and mtsarray has its CUDA backend, and on
the CPU whenever torch is importable. Without torch or the mtsarray package
it prints why and exits 0.

Usage: python3 bench/torch_move_data.py [--count N] [--rounds R] [--device cpu|cuda|all] [--json FILE]
The mtsarray package must be installed in this Python (pip install ./python).
"""

import argparse
import contextlib
import datetime
import json
import platform
import statistics
import sys
import time
from typing import List  # noqa: F401 (TorchScript type comments)

MOVEMENTS_TARGET = 1000.0  # x faster than one index_put_ per movement (differing ranges)
VECTORISED_TARGET = 3.0    # x faster than metatensor-torch's vectorised path, end to end (shared range)
PROPERTIES = 64
SHARED_START_IN, SHARED_START_OUT, SHARED_LENGTH = 16, 0, 32
METATENSOR_TORCH = "metatensor-torch vectorised (host indices, upload, index_select + index_put_)"


def skip(reason):
    print(f"torch_move_data: skipped: {reason}")
    sys.exit(0)


def load_mtsarray():
    """The mtsarray package, or a skip with the reason."""
    try:
        import mtsarray
    except ImportError as error:
        skip(f"the mtsarray package is not installed in {sys.executable} ({error}): pip install ./python")
    return mtsarray


# ---- the cases ---------------------------------------------------------------

def make_movements(torch, count, shared):
    """(count, 5) int64 CPU tensor of (sample_in, sample_out, start_in,
    start_out, length): scattered samples; differing ranges (lengths 1..32 of
    64, random starts) or one shared range [16, 48) -> [0, 32)."""
    generator = torch.Generator().manual_seed(42)
    sample_in = torch.randperm(count, generator=generator)
    sample_out = torch.arange(count)
    if shared:
        start_in = torch.full((count,), SHARED_START_IN)
        start_out = torch.full((count,), SHARED_START_OUT)
        length = torch.full((count,), SHARED_LENGTH)
    else:
        length = torch.randint(1, 33, (count,), generator=generator)
        start_in = (torch.rand(count, generator=generator, dtype=torch.float64) * (PROPERTIES - length + 1)).long()
        start_out = (torch.rand(count, generator=generator, dtype=torch.float64) * (PROPERTIES - length + 1)).long()
    columns = [sample_in, sample_out, start_in, start_out, length]
    return torch.stack([c.to(torch.int64) for c in columns], dim=1).contiguous()


def flat_indices(torch, movements, properties_in, properties_out):
    """Flat element indices (input, output) of every element a movement set copies."""
    length = movements[:, 4]
    owner = torch.repeat_interleave(torch.arange(movements.shape[0]), length)
    first = torch.cumsum(length, 0) - length
    offset = torch.arange(int(length.sum())) - first[owner]
    rows = movements[owner]
    flat_in = rows[:, 0] * properties_in + rows[:, 2] + offset
    flat_out = rows[:, 1] * properties_out + rows[:, 3] + offset
    return flat_in, flat_out


# ---- timing ---------------------------------------------------------------------

def measure(operations, synchronize, rounds, batch_seconds=0.02):
    """Median seconds per call of each operation, interleaved: every round
    runs a batch of each in turn. Batches are calibrated to >= batch_seconds
    (one call for slow operations); the first call is a warm-up."""
    counts = {}
    for name, operation in operations.items():
        operation()
        synchronize()
        start = time.perf_counter()
        operation()
        synchronize()
        single = max(time.perf_counter() - start, 1e-7)
        counts[name] = max(1, min(100000, int(batch_seconds / single)))
    samples = {name: [] for name in operations}
    for _ in range(rounds):
        for name, operation in operations.items():
            synchronize()
            start = time.perf_counter()
            for _ in range(counts[name]):
                operation()
            synchronize()
            samples[name].append((time.perf_counter() - start) / counts[name])
    return {name: statistics.median(values) for name, values in samples.items()}


def format_seconds(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


# ---- one case on one device -------------------------------------------------------

def run_case(torch, mts, device, count, shared, rounds):
    is_cuda = device.type == "cuda"
    stream = torch.cuda.Stream(device=device) if is_cuda else None
    movements = make_movements(torch, count, shared)
    properties_out = 32 if shared else PROPERTIES
    flat_in, flat_out = flat_indices(torch, movements, PROPERTIES, properties_out)
    payload = int(movements[:, 4].sum()) * 8

    with (torch.cuda.stream(stream) if is_cuda else contextlib.nullcontext()):
        input = torch.arange(count * PROPERTIES, dtype=torch.float64, device=device).reshape(count, PROPERTIES)
        outputs = {}  # one output per implementation, all checked against `expected`

        def output_for(name):
            outputs[name] = torch.zeros(count, properties_out, dtype=torch.float64, device=device)
            return outputs[name]

        expected = torch.zeros(count, properties_out, dtype=torch.float64, device=device)
        expected.view(-1)[flat_out.to(device)] = input.view(-1)[flat_in.to(device)]

        # (a) mtsarray, zero-copy on the torch tensors, on torch's stream
        mts_input = mts.from_dlpack(input, stream=stream)
        mts_output = mts.from_dlpack(output_for("mtsarray"), stream=stream)
        host_movements = movements.numpy()  # (N, 5) int64, read in place by move_data

        def mtsarray_move():
            mts_output.move_data(mts_input, host_movements)

        operations = {"mtsarray move_data": mtsarray_move}

        # (b) metatensor-torch: one index_put_ per movement
        as_list = movements.tolist()
        loop_output = output_for("index_put_ per movement (Python loop)")

        def per_movement_python():
            for s_in, s_out, p_in, p_out, n in as_list:
                loop_output[s_out, ..., p_out:p_out + n] = input[s_in, ..., p_in:p_in + n]

        operations["index_put_ per movement (Python loop)"] = per_movement_python
        notes = []
        try:
            scripted = torch.jit.script(_per_movement_scripted)
            script_output = output_for("index_put_ per movement (TorchScript loop)")
            operations["index_put_ per movement (TorchScript loop)"] = (
                lambda: scripted(script_output, input, movements))
        except Exception as error:  # TorchScript may be unavailable (deprecated)
            notes.append(f"TorchScript loop left out: {type(error).__name__}: {error}")

        # (c) metatensor-torch's vectorised path (shared range), as it runs on
        # every call; (d) the same operations on indices already on the device
        if shared:
            end_in, end_out = SHARED_START_IN + SHARED_LENGTH, SHARED_START_OUT + SHARED_LENGTH
            real_output = output_for(METATENSOR_TORCH)
            real_output_slice = real_output[..., SHARED_START_OUT:end_out]

            def metatensor_torch_vectorised():
                # TorchDataArray::move_data: index tensors from the host movement
                # list, uploaded, then index_select + index_put_ on the slices
                samples_in = movements[:, 0].contiguous().to(device, non_blocking=False)
                samples_out = movements[:, 1].contiguous().to(device, non_blocking=False)
                selected = input[..., SHARED_START_IN:end_in].index_select(0, samples_in)
                real_output_slice.index_put_((samples_out,), selected)

            operations[METATENSOR_TORCH] = metatensor_torch_vectorised

            index_in = movements[:, 0].to(device)
            index_out = movements[:, 1].to(device)
            vector_output = output_for("index_select + index_put_ (indices already on the device)")
            input_slice = input[..., SHARED_START_IN:end_in]
            output_slice = vector_output[..., SHARED_START_OUT:end_out]
            operations["index_select + index_put_ (indices already on the device)"] = (
                lambda: output_slice.index_put_((index_out,), input_slice.index_select(0, index_in)))
        else:
            device_in = flat_in.to(device)
            device_out = flat_out.to(device)
            flat_output = output_for("index_select + index_put_ (flat element indices on the device)")
            flat_view = flat_output.view(-1)
            input_view = input.view(-1)
            operations["index_select + index_put_ (flat element indices on the device)"] = (
                lambda: flat_view.index_put_((device_out,), input_view.index_select(0, device_in)))

        def synchronize():
            if is_cuda:
                stream.synchronize()

        # values first: one call of each
        for name, operation in list(operations.items()):
            try:
                operation()
            except Exception as error:
                if "TorchScript" not in name:
                    raise
                notes.append(f"TorchScript loop left out: {type(error).__name__}: {error}")
                del operations[name]
                del outputs[name]
        synchronize()
        for name, output in outputs.items():
            if not torch.equal(output, expected):
                raise RuntimeError(f"{name} gives wrong values on {device}")

        times = measure(operations, synchronize, rounds)
        synchronize()
        del mts_input, mts_output  # the imports hold the tensors' memory; released here

    mtsarray = times["mtsarray move_data"]
    rows = [{"implementation": name, "seconds": seconds, "ratio_to_mtsarray": seconds / mtsarray}
            for name, seconds in times.items()]
    targets = []
    loops = [times[n] for n in times if n.startswith("index_put_ per movement")]
    if not is_cuda:
        pass  # the targets are the GPU's: CPU rows only show the ratios
    elif not shared:
        # against the fastest per-movement loop: the conservative reading
        ratio = min(loops) / mtsarray
        targets.append({"name": f">={MOVEMENTS_TARGET:.0f}x per-movement index_put_", "ratio": ratio,
                        "pass": ratio >= MOVEMENTS_TARGET})
    else:
        ratio = times[METATENSOR_TORCH] / mtsarray
        targets.append({"name": f">={VECTORISED_TARGET:.0f}x metatensor-torch's vectorised path, end to end",
                        "ratio": ratio, "pass": ratio >= VECTORISED_TARGET})
    name = (f"{count} scattered movements, " +
            (f"shared range [{SHARED_START_IN},{SHARED_START_IN + SHARED_LENGTH}) of {PROPERTIES} -> "
             f"[{SHARED_START_OUT},{SHARED_START_OUT + SHARED_LENGTH})" if shared else "differing ranges (1..32 of 64)"))
    return {"case": name, "device": str(device), "movements": count, "payload_bytes": payload,
            "rows": rows, "targets": targets, "notes": notes}


def _per_movement_scripted(output, input, movements):
    # type: (Tensor, Tensor, Tensor) -> None
    # what metatensor-torch's TorchDataArray::move_data does, movement by movement
    as_list: List[List[int]] = movements.tolist()
    for m in as_list:
        output[m[1], ..., m[3]:m[3] + m[4]] = input[m[0], ..., m[2]:m[2] + m[4]]


def print_case(result):
    print(f"\n== move_data on {result['device']}: {result['case']}, f64, "
          f"{result['payload_bytes'] / 2**20:.1f} MiB moved")
    print(f"{'implementation':<80} {'time/call':>10} {'x mtsarray':>11}")
    for row in result["rows"]:
        print(f"{row['implementation']:<80} {format_seconds(row['seconds']):>10} "
              f"{row['ratio_to_mtsarray']:>10.3g}x")
    for target in result["targets"]:
        print(f"{'PASS' if target['pass'] else 'MISS'} {target['name']} (measured {target['ratio']:.3g}x)")
    for note in result["notes"]:
        print(f"note: {note}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100000, help="movements per case (100000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--json", help="also write the results to this file")
    arguments = parser.parse_args()

    try:
        import torch
    except ImportError as error:
        skip(f"PyTorch is not installed ({error}); this script compares mtsarray with torch")

    mts = load_mtsarray()
    devices = []
    if arguments.device in ("cpu", "all"):
        devices.append(torch.device("cpu"))
    if arguments.device in ("cuda", "all"):
        available, reason = mts.backend_available("cuda"), mts.backend_unavailable_reason("cuda")
        if not torch.cuda.is_available():
            print("torch_move_data: cuda rows skipped: torch sees no CUDA device")
        elif not available:
            print(f"torch_move_data: cuda rows skipped: mtsarray: {reason}")
        else:
            devices.append(torch.device("cuda", torch.cuda.current_device()))
    if not devices:
        skip("no device to run on")

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    print(f"torch_move_data: mtsarray {mts.__version__}, torch {torch.__version__}, {platform.processor() or platform.machine()}, {gpu}")
    print("times: end to end (host time until the stream is done), medians of interleaved rounds; "
          "x mtsarray = time / mtsarray's time")

    results = []
    for device in devices:
        for shared in (False, True):
            result = run_case(torch, mts, device, arguments.count, shared, arguments.rounds)
            print_case(result)
            results.append(result)

    misses = [f"{r['device']} {r['case']}: {t['name']}" for r in results for t in r["targets"] if not t["pass"]]
    passes = sum(1 for r in results for t in r["targets"] if t["pass"])
    print(f"\n== targets: {passes} PASS, {len(misses)} MISS")
    for line in misses:
        print(f"   MISS {line}")
    if arguments.json:
        with open(arguments.json, "w") as file:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "torch": torch.__version__, "mtsarray": mts.__version__, "gpu": gpu,
                       "results": results}, file, indent=2)
        print(f"wrote {arguments.json}")


if __name__ == "__main__":
    main()
