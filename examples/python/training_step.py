#!/usr/bin/env python3
"""A training loop whose batches are gathered on the GPU by mtsarray.

The dataset's per-atom features stay on the device, in one (atoms, features)
tensor that mtsarray reads zero-copy. The structures are split once into
fixed batches; for each batch, the movements gathering its atoms' rows (an
(N, 5) int64 NumPy array built without a Python loop over atoms), its batch
array and its index vectors are made once, and the movements are checked
once into a movement plan (mtsarray.MovePlan). Each step picks a batch and
runs its plan: ONE copy queued on PyTorch's current stream, no checks, no
allocation, nothing sent from the host. The batch goes to the model through
DLPack (torch.from_dlpack): no copy, and no synchronisation, since the batch
already works on the stream PyTorch reads it on.

On a GPU, the example proves nothing waited: it queues a slow kernel first,
runs whole training steps, and checks the stream is still busy when they
return (and PyTorch's sync debug mode is set to raise on any synchronising
call). It runs on the CPU when there is no GPU (or no CUDA backend in
mtsarray), and exits 0 with the reason when PyTorch is not installed.

Usage: python3 examples/python/training_step.py [--steps N] [--device auto|cpu|cuda]
"""

import argparse
import sys

import numpy as np

import mtsarray

N_STRUCTURES = 512
N_FEATURES = 64
BATCH_STRUCTURES = 32


def choose_device(torch, requested):
    cuda_ok = torch.cuda.is_available() and mtsarray.backend_available("cuda")
    if requested == "cuda" and not cuda_ok:
        sys.exit("training_step: --device cuda, but " + (
            "PyTorch sees no CUDA device" if not torch.cuda.is_available()
            else "mtsarray: " + mtsarray.backend_unavailable_reason("cuda")))
    if requested == "cpu" or not cuda_ok:
        if requested == "auto":
            reason = ("PyTorch sees no CUDA device" if not torch.cuda.is_available()
                      else "mtsarray: " + mtsarray.backend_unavailable_reason("cuda"))
            print(f"training_step: running on the CPU ({reason})")
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def batch_movements(offsets, counts, structures, n_features):
    """The (N, 5) movements gathering the atoms of `structures` (in that
    order) into consecutive batch rows, and each row's position in the batch
    (for the per-structure sum). Vectorised: no Python loop over atoms."""
    sizes = counts[structures]
    total = int(sizes.sum())
    slot = np.repeat(np.arange(len(structures)), sizes)
    first_row = np.cumsum(sizes) - sizes
    rows = np.arange(total)
    sample_in = offsets[structures][slot] + (rows - first_row[slot])
    movements = np.zeros((total, 5), dtype=np.int64)
    movements[:, 0] = sample_in
    movements[:, 1] = rows
    movements[:, 4] = n_features  # every property, starting at 0 in both
    return movements, slot


def upload(torch, values, device):
    """A small host array on the device, without making the host wait."""
    tensor = torch.from_numpy(values)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    arguments = parser.parse_args()

    try:
        import torch
    except ImportError as error:
        print(f"training_step: skipped: PyTorch is not installed ({error})")
        return 0

    device = choose_device(torch, arguments.device)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)

    # the dataset: per-atom features of every structure, on the device
    counts = rng.integers(4, 40, size=N_STRUCTURES)
    offsets = np.cumsum(counts) - counts
    features_tensor = torch.randn(int(counts.sum()), N_FEATURES, dtype=torch.float32, device=device)
    energies = torch.randn(N_STRUCTURES, dtype=torch.float32, device=device)
    stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
    features = mtsarray.from_dlpack(features_tensor, stream=stream)  # zero-copy
    assert features.data_ptr == features_tensor.data_ptr()

    model = torch.nn.Sequential(
        torch.nn.Linear(N_FEATURES, 64), torch.nn.SiLU(), torch.nn.Linear(64, 1)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)  # no host synchronisation in its step

    # [batches]
    # fixed batches, each made once: its movements, batch array, plan and
    # index vectors on the device
    batches = []
    order = rng.permutation(N_STRUCTURES)
    for structures in np.split(order, N_STRUCTURES // BATCH_STRUCTURES):
        movements, slot = batch_movements(offsets, counts, structures, N_FEATURES)
        shape = (len(movements), N_FEATURES)
        batch = mtsarray.zeros(shape, dtype="float32", device=str(device))
        batch.stream = stream  # None on the CPU: no stream
        plan = mtsarray.MovePlan(batch, features, movements)
        indices = upload(torch, slot, device), upload(torch, structures, device)
        batches.append((movements, batch, plan, *indices))
    # [batches]

    def training_step(check=False):
        chosen = batches[rng.integers(len(batches))]
        movements, batch, plan, slot_tensor, structures = chosen
        plan(batch, features)  # the gather, on PyTorch's current stream

        x = torch.from_dlpack(batch)  # zero-copy; same stream: nothing to wait for
        if check:
            assert x.data_ptr() == batch.data_ptr, "the batch was copied"
            expected = features_tensor[torch.from_numpy(movements[:, 0]).to(device)]
            assert torch.equal(x, expected), "the gathered batch is wrong"

        per_atom = model(x).squeeze(-1)
        predicted = torch.zeros(BATCH_STRUCTURES, device=device).index_add_(0, slot_tensor, per_atom)
        targets = energies[structures]
        loss = torch.nn.functional.mse_loss(predicted, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    first = training_step(check=True)

    if stream is not None:
        # nothing in a step may wait for the device: queue 0.1 s of GPU work
        # first, run steps, and check the stream is still busy afterwards
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                training_step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        if stream.query():
            sys.exit("training_step: the GPU finished before the steps returned: something waited")
        print("training_step: three steps queued while the GPU was busy: no step waited for it")

    last = first
    for _ in range(arguments.steps):
        last = training_step()
    print(f"training_step: {arguments.steps + 1} steps on {device}, loss {first.item():.4f} -> {last.item():.4f}")
    if not torch.isfinite(last):
        sys.exit("training_step: the loss is not finite")
    return 0


if __name__ == "__main__":
    sys.exit(main())
