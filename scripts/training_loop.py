"""mtsarray inside a PyTorch training loop, on one CUDA GPU: the GPU check's
training-loop scenario (scripts/gpu_check.sh runs it whole, and a short
version under compute-sanitizer).

What a training loop does to a library, all at once:
- PyTorch holds most of the GPU's memory (a tensor of most of what is free,
  its caching allocator keeps the rest it frees);
- the step is captured in a CUDA graph (torch.cuda.graph, Global capture
  mode, on a side stream warmed up first) and replayed many times: a
  copy_into from host memory (the step's batch, written into the same host
  array before each replay), a move_data into a PyTorch tensor (imported
  zero-copy), a move plan execute, and a PyTorch operation on the result;
- 4 data-loading threads come and go, each using mtsarray on a stream of its
  own (a PyTorch stream, or its per-thread default stream), one handing an
  array to the main thread, which destroys it after the thread has exited;
- every step is checked against a CPU reference (NumPy), exactly.
After the loop, memory: what mtsarray freed goes back to the device at the
next synchronisation (beyond its release threshold), an allocation that
does not fit fails with a clear error, and mtsarray.empty_cache() gives the
cache back.

Usage: python3 training_loop.py [--steps N] [--threads N] [--hold FRACTION] [--short]
(--short: 20 replays, 2 threads, nothing held, no memory section: the
version run under compute-sanitizer, where an allocation that does not fit
would count as an error). Exits 0 when every check passed; 1 (with the first failure) otherwise; prints
"skipped: <why>" and exits 0 where there is no CUDA GPU, no PyTorch with
CUDA, or no mtsarray CUDA backend.
"""

import argparse
import sys
import threading
import time

import numpy as np

ROWS = 512  # samples of a batch
COLUMNS = 8  # properties
GATHERED = 640  # samples of the tensor the batch is gathered into


def skip_reason():
    try:
        import torch
    except ImportError as error:
        return f"PyTorch is not installed ({error})"
    if not torch.cuda.is_available() or torch.version.cuda is None:
        return "PyTorch sees no CUDA GPU"
    import mtsarray

    if not mtsarray.backend_available("cuda"):
        return f"the mtsarray CUDA backend is not usable: {mtsarray.backend_unavailable_reason('cuda')}"
    return None


def movements_of(rng):
    """The step's gather: every batch sample to a distinct place of the
    gathered tensor, in a scattered order, some ranges of properties."""
    out = rng.permutation(GATHERED)[:ROWS]
    starts = rng.integers(0, 3, size=ROWS)
    lengths = rng.integers(1, COLUMNS - 3, size=ROWS)
    movements = np.stack([np.arange(ROWS), out, starts, starts + 1, lengths], axis=1)
    return movements.astype(np.int64)


def apply_movements(output, values, movements):
    """move_data on NumPy arrays, one movement at a time: the reference."""
    for sample_in, sample_out, start_in, start_out, length in movements:
        output[sample_out, start_out:start_out + length] = values[sample_in, start_in:start_in + length]


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def worker(index, step, streams, movements, handed, errors):
    """A data-loading thread: its own mtsarray work on its own stream (a
    PyTorch stream, or stream 2: this thread's per-thread default stream),
    checked, then gone; worker 0 hands an array to the main thread."""
    import mtsarray

    try:
        rng = np.random.default_rng(1000 * step + index)
        values = rng.standard_normal((ROWS, COLUMNS))
        stream = streams[index] if index % 2 == 1 else 2
        batch = mtsarray.zeros((ROWS, COLUMNS), device="cuda")
        batch.stream = stream
        batch.copy_from(mtsarray.from_dlpack(values))
        gathered = mtsarray.zeros((GATHERED, COLUMNS), device="cuda")
        gathered.stream = stream
        gathered.move_data(batch, movements)
        expected = np.zeros((GATHERED, COLUMNS))
        apply_movements(expected, values, movements)
        result = np.asarray(gathered.copy("cpu"))
        if not np.array_equal(result, expected):
            errors.append(f"worker {index} at step {step}: wrong values")
        if index == 0:
            handed.append(batch)  # destroyed by the main thread, after this one has gone
    except Exception as error:  # noqa: BLE001 (reported by the main thread)
        errors.append(f"worker {index} at step {step}: {type(error).__name__}: {error}")


def run(steps, threads, hold_fraction, memory_section):
    import torch

    import mtsarray

    device = torch.device("cuda", 0)
    rng = np.random.default_rng(40)
    free, total = torch.cuda.mem_get_info(device)
    print(f"GPU: {torch.cuda.get_device_name(device)}, {total / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free; "
          f"PyTorch {torch.__version__}, mtsarray {mtsarray.__version__}")

    # PyTorch holds most of the memory
    hog = None
    if hold_fraction > 0:
        hog = torch.empty(int(free * hold_fraction), dtype=torch.uint8, device=device)
        print(f"PyTorch holds {hog.numel() / 2**30:.1f} GiB")

    side = torch.cuda.Stream(device)
    worker_streams = [torch.cuda.Stream(device) for _ in range(threads)]
    movements = movements_of(rng)
    plan_movements = np.stack([np.arange(GATHERED), np.arange(GATHERED)[::-1], np.zeros(GATHERED, dtype=np.int64),
                               np.zeros(GATHERED, dtype=np.int64), np.full(GATHERED, COLUMNS)], axis=1)

    # the arrays of the step, all on the side stream the graph is captured on
    host_batch = mtsarray.zeros((ROWS, COLUMNS))  # the CPU array each step's batch is written into
    device_batch = mtsarray.zeros((ROWS, COLUMNS), device="cuda")
    device_batch.stream = side
    gathered_t = torch.zeros((GATHERED, COLUMNS), dtype=torch.float64, device=device)
    output_t = torch.zeros((GATHERED, COLUMNS), dtype=torch.float64, device=device)
    torch.cuda.synchronize()
    gathered = mtsarray.from_dlpack(gathered_t, stream=side)  # zero-copy: PyTorch's memory
    output = mtsarray.from_dlpack(output_t, stream=side)
    check(gathered.stream == side.cuda_stream and output.stream == side.cuda_stream, "the arrays' stream")
    plan = mtsarray.MovePlan(output, gathered, plan_movements)

    def step():
        device_batch.copy_from(host_batch)
        gathered.move_data(device_batch, movements)
        plan(output, gathered)
        return output_t * 2.0 + 1.0

    def write_batch(values):
        host_batch.copy_from(mtsarray.from_dlpack(values))

    def expected_of(values):
        gathered_ref = np.zeros((GATHERED, COLUMNS))
        apply_movements(gathered_ref, values, movements)
        output_ref = np.zeros((GATHERED, COLUMNS))
        apply_movements(output_ref, gathered_ref, plan_movements)
        return output_ref * 2.0 + 1.0

    # warm-up on the side stream (PyTorch's advice before a capture)
    with torch.cuda.stream(side):
        for _ in range(3):
            values = rng.standard_normal((ROWS, COLUMNS))
            write_batch(values)
            result_t = step()
            side.synchronize()
            check(np.array_equal(result_t.cpu().numpy(), expected_of(values)), "wrong values in the warm-up")

    handed = []
    errors = []
    pool = []

    def start_workers(at):
        for thread in pool:
            thread.join()
        pool.clear()
        while handed:
            handed.pop()  # destroyed here, its owner thread gone
        for index in range(threads):
            thread = threading.Thread(target=worker, args=(index, at, worker_streams, movements, handed, errors))
            thread.start()
            pool.append(thread)

    start_workers(0)  # they run during the capture too
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        result_t = step()
    captured_at = time.perf_counter()

    for at in range(steps):
        if at % 50 == 25:
            start_workers(at)
        values = rng.standard_normal((ROWS, COLUMNS))
        write_batch(values)  # the batch of this step, in the host array the graph reads
        with torch.cuda.stream(side):
            graph.replay()
        side.synchronize()
        result = result_t.cpu().numpy()
        check(np.array_equal(result, expected_of(values)),
              f"replay {at}: wrong values ({np.count_nonzero(result != expected_of(values))} elements)")
        check(not errors, "; ".join(errors))
    for thread in pool:
        thread.join()
    handed.clear()
    check(not errors, "; ".join(errors))
    print(f"{steps} replays, each checked against NumPy, in {time.perf_counter() - captured_at:.2f} s; "
          f"{threads} threads started {1 + (steps + 24) // 50} times")

    del graph, result_t, plan, gathered, output, device_batch
    if hog is not None:
        del hog
    torch.cuda.synchronize()
    if memory_section:
        check_memory(torch, mtsarray, device)


def check_memory(torch, mtsarray, device):
    # memory: mtsarray's freed memory goes back at the next synchronisation
    torch.cuda.empty_cache()
    mtsarray.empty_cache("cuda:0")
    threshold = mtsarray.get_release_threshold("cuda:0")
    free, total = torch.cuda.mem_get_info(device)
    check(threshold == total // 16, f"release threshold {threshold}, not 1/16 of the device ({total // 16})")
    big = (free // 4) // 8 * 8
    array = mtsarray.zeros((big // 8,), device="cuda")
    array.synchronize()
    del array
    for _ in range(2):  # synchronisations after the free: beyond its threshold, the pool gives memory back
        marker = mtsarray.zeros((1,), device="cuda")
        marker.synchronize()
    free_after, _ = torch.cuda.mem_get_info(device)
    check(free - free_after <= threshold + (64 << 20),
          f"mtsarray kept {(free - free_after) / 2**20:.0f} MiB after a synchronisation (threshold "
          f"{threshold / 2**20:.0f} MiB)")

    # an allocation that does not fit: a clear error; fits once PyTorch gives its cache back
    free, _ = torch.cuda.mem_get_info(device)
    hog = torch.empty(max(free - (256 << 20), 0), dtype=torch.uint8, device=device)
    del hog  # kept by PyTorch's caching allocator
    try:
        mtsarray.zeros((1 << 27,), device="cuda")  # 1 GiB
        print("note: 1 GiB still fitted beside PyTorch's cache (the driver had room)")
    except mtsarray.Error as error:
        check("out of memory" in str(error), f"the error of an allocation that does not fit: {error}")
        print(f"an allocation that did not fit: {str(error)[:200]}")
    torch.cuda.empty_cache()
    fits = mtsarray.zeros((1 << 27,), device="cuda")
    fits.synchronize()
    del fits
    mtsarray.empty_cache("cuda:0")
    print("memory: released at synchronisations, a clear out-of-memory error, empty_cache")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="graph replays (default 1000)")
    parser.add_argument("--threads", type=int, default=4, help="data-loading threads (default 4)")
    parser.add_argument("--hold", type=float, default=0.85,
                        help="fraction of the free memory PyTorch holds during the loop (default 0.85)")
    parser.add_argument("--short", action="store_true",
                        help="20 replays, 2 threads, nothing held, no memory section (for compute-sanitizer)")
    arguments = parser.parse_args()
    if arguments.short:
        arguments.steps, arguments.threads, arguments.hold = 20, 2, 0.0
    reason = skip_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    try:
        run(arguments.steps, arguments.threads, arguments.hold, memory_section=not arguments.short)
    except Failure as failure:
        print(f"FAILED: {failure}")
        return 1
    print("training loop: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
