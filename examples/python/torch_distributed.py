#!/usr/bin/env python3
"""A TensorMap reduced across processes with torch.distributed, on mtsarray arrays.

Every process holds its own contribution to the same TensorMap (per-atom
values and their gradients), moves it to its device with mtsarray, and sums
it over the processes the way data-parallel training sums gradients:

  1. start the processes (this script does, when it is not started by torchrun)
  2. the process's TensorMap, moved to its device by mtsarray.tensormap_to
  3. torch tensors viewing the mtsarray arrays, without a copy (tensormap_as)
  4. torch.distributed.all_reduce on those tensors, in place
  5. the sums, read back through mtsarray, checked against NumPy

The reduction writes the mtsarray arrays themselves: the torch tensors are
their memory. On a GPU the arrays work on PyTorch's current stream, the one
torch.distributed orders its collectives after (NCCL runs them on a stream
of its own, made to wait for the current one, and all_reduce makes the
current stream wait for the result), so nothing waits on the host.

Usage: python3 examples/python/torch_distributed.py [--processes N]
           [--backend auto|gloo|nccl] [--device auto|cpu|cuda]
  auto: NCCL on one GPU per process when PyTorch and mtsarray both see enough
  GPUs, else gloo on the CPU. Under torchrun, the processes are torchrun's.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
from metatensor import Labels, TensorBlock, TensorMap

import mtsarray

SPECIES = (1, 6, 8)
ATOMS = (40, 25, 17)
PROPERTIES = 8


def contribution(rank, block, gradient, shape):
    """What process `rank` computes for a block's values (or gradients):
    whole numbers, whose sum over the processes is exact in any order."""
    count = int(np.prod(shape))
    base = 1000.0 * (rank + 1) + 100.0 * (2 * block + gradient)
    return (base + np.arange(count) % 97).reshape(shape)


def local_tensor_map(rank):
    """2. The process's TensorMap, in NumPy arrays, as a model would give it."""
    blocks = []
    for b, atoms in enumerate(ATOMS):
        block = TensorBlock(contribution(rank, b, 0, (atoms, PROPERTIES)), Labels.range("atom", atoms), [],
                            Labels.range("n", PROPERTIES))
        pairs = np.array([[g // 2, (g // 2 + g % 2) % atoms] for g in range(2 * atoms)], dtype=np.int32)
        block.add_gradient("positions", TensorBlock(
            contribution(rank, b, 1, (2 * atoms, 3, PROPERTIES)), Labels(["sample", "atom"], pairs),
            [Labels.range("xyz", 3)], Labels.range("n", PROPERTIES)))
        blocks.append(block)
    return TensorMap(Labels(["species"], np.array([[s] for s in SPECIES], dtype=np.int32)), blocks)


def every_values(tensor):
    for block in tensor.blocks():
        yield block.values
        for parameter in block.gradients_list():
            yield block.gradient(parameter).values


def reduce_tensor_map(rank, local_rank, world_size, backend, init_method):
    """Steps 2 to 5 in process `rank` (`local_rank` on its machine)."""
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        torch.cuda.set_device(local_rank)  # one GPU per process, before NCCL sees it
        device, stream = f"cuda:{local_rank}", torch.cuda.current_stream()
    else:
        device, stream = "cpu", None
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size)
    try:
        # 2. moved to the device; on a GPU the arrays work on PyTorch's stream
        moved = mtsarray.tensormap_to(local_tensor_map(rank), device, stream=stream)

        # 3. torch tensors that are the mtsarray arrays' memory: zero-copy
        tensors = mtsarray.tensormap_as(moved, arrays="torch")
        for ours, theirs in zip(every_values(moved), every_values(tensors)):
            if theirs.data_ptr() != ours.data_ptr or theirs.device != torch.device(device):
                raise AssertionError(f"rank {rank}: torch.from_dlpack copied an array ({theirs.device})")

        # 4. summed over the processes, in place, values and gradients
        for values in every_values(tensors):
            dist.all_reduce(values, op=dist.ReduceOp.SUM)

        # 5. read back through mtsarray (not torch): the reduction wrote its arrays
        expected = [sum(contribution(r, b, g, shape) for r in range(world_size))
                    for b, g, shape in layout(moved)]
        for index, (values, wanted) in enumerate(zip(every_values(moved), expected)):
            got = np.from_dlpack(values.copy("cpu"))
            if not np.array_equal(got, wanted):
                raise AssertionError(f"rank {rank}: array {index} is not the sum over the processes "
                                     f"(first values {got.ravel()[:3]}, expected {wanted.ravel()[:3]})")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def layout(tensor):
    """(block, 0 for values / 1 for gradients, shape) of every array, in order."""
    for b, block in enumerate(tensor.blocks()):
        yield b, 0, tuple(block.values.shape)
        for parameter in block.gradients_list():
            yield b, 1, tuple(block.gradient(parameter).values.shape)


def choose_backend(torch, requested_backend, requested_device, processes):
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    usable = mtsarray.backend_available("cuda") and gpus >= processes
    wants_gpu = requested_backend == "nccl" or requested_device == "cuda"
    if wants_gpu and not usable:
        sys.exit(f"torch_distributed: NCCL needs a GPU per process: {processes} processes, PyTorch sees {gpus} "
                 f"GPUs, mtsarray's CUDA backend: {mtsarray.backend_unavailable_reason('cuda') or 'usable'}")
    if requested_backend == "gloo" or requested_device == "cpu":
        return "gloo"
    return "nccl" if wants_gpu or usable else "gloo"


def spawned(index, world_size, backend, init_method):
    reduce_tensor_map(index, index, world_size, backend, init_method)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    arguments = parser.parse_args()
    try:
        import torch
        import torch.multiprocessing
    except ImportError:
        print("torch_distributed: skipped: PyTorch is not installed")
        return

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        world_size = int(os.environ["WORLD_SIZE"])
        backend = choose_backend(torch, arguments.backend, arguments.device, int(os.environ["LOCAL_WORLD_SIZE"]))
        reduce_tensor_map(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), world_size, backend, "env://")
        return

    # 1. start the processes: a rendezvous file instead of a network port
    backend = choose_backend(torch, arguments.backend, arguments.device, arguments.processes)
    with tempfile.TemporaryDirectory() as folder:
        init_method = "file://" + os.path.join(folder, "rendezvous")
        # "spawn": fresh interpreters (a forked child may not use CUDA)
        torch.multiprocessing.spawn(spawned, args=(arguments.processes, backend, init_method),
                                    nprocs=arguments.processes, join=True)
    print(f"torch_distributed: {arguments.processes} processes, {backend}, every block's values and gradients "
          "summed in place on the mtsarray arrays (no copy) and checked against NumPy")


if __name__ == "__main__":
    main()
