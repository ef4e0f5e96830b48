#!/usr/bin/env python3
"""The halo exchange of a domain-decomposed simulation on the rows of a
metatensor TensorMap, with mtsarray arrays and mpi4py: the Python side of
examples/mpi_halo.c, in the same steps.

The ranks form a ring; each owns N atoms and keeps copies ("ghosts") of the
last G atoms of its left neighbour and the first G of its right one. Its
TensorMap has three blocks sampled by "atom": descriptor and force (N + 2G
rows: the owned atoms, then the ghosts) and halo_force (N rows). Each step
sends descriptor rows forward (owners -> ghosts) and force rows in reverse
(ghosts -> the owners' halo_force): move_data packs the rows into one array
per neighbour, mpi4py's Sendrecv sends the MtsArray itself (it reads it
through DLPack, no copy), move_data unpacks it. At the end, an Allreduce of
MtsArrays sums a checksum over the ranks.

  1. initialise MPI, pick the device   5. exchange with mpi4py: who waits for whom
  2. build the rank's TensorMap        6. unpack with move_data
  3. the row lists of each neighbour   7. reverse communication
  4. pack with move_data               8. a sum over the ranks (Allreduce)

Every received value is checked (exit status 1 if one is wrong).

What it needs: mpi4py built against the MPI that runs it
(pip install --no-binary=mpi4py mpi4py), NumPy, metatensor-core, mtsarray.
On the CPU, any MPI. On a GPU, mpi4py hands MPI the arrays' device pointers
only with --transport direct, which needs a CUDA-aware (ROCm-aware) MPI: say
so with MTSARRAY_MPI_GPU_AWARE=1. Otherwise (the default on a GPU) the rows
are staged through page-locked host arrays, which any MPI takes.

Usage: mpiexec -n 4 python3 examples/python/mpi_halo.py [--device cpu|cuda|rocm|auto]
       [--transport direct|staged]
"""

import argparse
import os
import sys

import numpy as np

import metatensor
import mtsarray

ATOMS, GHOSTS, FEATURES, XYZ, STEPS = 1000, 100, 8, 3, 3
TO_LEFT, TO_RIGHT = 1, 2  # MPI tags: with 2 ranks, left == right


def value(atom, n, step):
    """Column n of an atom's row at a step: exact, and any rank can compute it."""
    return 1e9 * step + 1e2 * np.asarray(atom, dtype=np.float64)[:, None] + np.arange(n)[None, :]


def movements(rows_in, rows_out, width):
    """The (N, 5) movements copying whole rows: row rows_in[i] -> rows_out[i]."""
    rows_in = np.asarray(rows_in, dtype=np.int64)
    zeros = np.zeros_like(rows_in)
    return np.stack([rows_in, np.asarray(rows_out, dtype=np.int64), zeros, zeros, zeros + width], axis=1)


def write_rows(block, first, atoms, width, sign, step, device):
    """The simulation's own work: rows first.. of `block` get sign * value()."""
    host = mtsarray.from_dlpack(np.ascontiguousarray(sign * value(atoms, width, step)))
    source = host if device == "cpu" else host.copy(device)  # queued on the device's default stream
    block.move_data(source, movements(np.arange(len(atoms)), first + np.arange(len(atoms)), width))


def check_rows(block, first, atoms, width, sign, step, comm):
    """The received rows hold what their owner wrote, or every rank stops."""
    actual = np.asarray(block.copy("cpu"))[first:first + len(atoms)]  # the host waits for the block's work
    expected = sign * value(atoms, width, step)
    if not np.array_equal(actual, expected):
        wrong = np.argwhere(actual != expected)[0]
        print(f"mpi_halo.py: WRONG VALUE {actual[tuple(wrong)]!r} in row {first + wrong[0]}, step {step}, "
              f"rank {comm.Get_rank()}", file=sys.stderr, flush=True)
        comm.Abort(1)


class Message:
    """One direction: its movements and arrays, made once. Each neighbour
    has its own send and receive array of G rows."""

    def __init__(self, from_rows, to_rows, width, device, staged):
        self.width = width
        self.pack = [movements(from_rows[:GHOSTS], np.arange(GHOSTS), width),   # to the left
                     movements(from_rows[GHOSTS:], np.arange(GHOSTS), width)]   # to the right
        self.unpack = [movements(np.arange(GHOSTS), to_rows[:GHOSTS], width),   # from the left
                       movements(np.arange(GHOSTS), to_rows[GHOSTS:], width)]   # from the right
        self.send = [mtsarray.zeros((GHOSTS, width), device=device) for _ in range(2)]
        self.receive = [mtsarray.zeros((GHOSTS, width), device=device) for _ in range(2)]
        self.staged = staged
        if staged:
            # what MPI reads and writes: page-locked host arrays, refilled every step
            host = {"cuda": "cuda_host", "rocm": "rocm_host"}.get(device.split(":")[0], "cpu")
            self.host_send = [mtsarray.zeros((GHOSTS, width), device=host) for _ in range(2)]
            self.host_receive = [mtsarray.zeros((GHOSTS, width), device=host) for _ in range(2)]
        for array in self.send + self.receive:
            array.synchronize()  # zeroed before MPI may touch them

    def communicate(self, source, target, comm, left, right):
        """Steps 4 to 6: rows of `source` -> send -> MPI -> receive -> rows of `target`."""
        # 4. Pack: the rows each neighbour needs into its send array (queued on the array's stream)
        for send, pack in zip(self.send, self.pack):
            send.move_data(source, pack)
        # 5. Exchange. MPI is not stream-aware: it reads and writes the buffers
        #    whenever it likes between the call and its return, so the host
        #    waits for the pack first: staged, through the copy into host
        #    memory (which waits); direct, with synchronize().
        if self.staged:
            for host, send in zip(self.host_send, self.send):
                host.copy_from(send)
            outgoing, incoming = self.host_send, self.host_receive
        else:
            for send in self.send:
                send.synchronize()
            outgoing, incoming = self.send, self.receive
        # mpi4py takes the MtsArrays as they are (DLPack): no copy
        comm.Sendrecv(outgoing[0], dest=left, sendtag=TO_LEFT, recvbuf=incoming[1], source=right, recvtag=TO_LEFT)
        comm.Sendrecv(outgoing[1], dest=right, sendtag=TO_RIGHT, recvbuf=incoming[0], source=left, recvtag=TO_RIGHT)
        # 6. Unpack, queued now that MPI returned (staged: uploaded first, on the stream)
        for index, unpack in enumerate(self.unpack):
            if self.staged:
                self.receive[index].copy_from(self.host_receive[index])
            target.move_data(self.receive[index], unpack)


def node_local_rank(comm):
    """This rank's rank among the ranks of its node (MPI_COMM_TYPE_SHARED groups
    the ranks that share memory), as examples/node_local_gpu.h does in C."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def choose_device(requested, local_rank):
    """auto: CUDA, then ROCm, when mtsarray can use one, else the CPU. Each rank
    takes the GPU of its node-local rank, modulo the GPUs it sees (a launcher that
    gives every rank its own, with CUDA_VISIBLE_DEVICES, leaves one: GPU 0)."""
    if requested == "cpu":
        return "cpu"
    if requested != "auto" and not mtsarray.backend_available(requested):
        sys.exit(f"mpi_halo.py: --device {requested}, but {mtsarray.backend_unavailable_reason(requested)}")
    kinds = [requested] if requested != "auto" else [k for k in ("cuda", "rocm") if mtsarray.backend_available(k)]
    if not kinds:
        return "cpu"
    return f"{kinds[0]}:{local_rank % mtsarray.device_count(kinds[0])}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", choices=["cpu", "cuda", "rocm", "auto"])
    parser.add_argument("--transport", default=None, choices=["direct", "staged"])
    arguments = parser.parse_args()
    try:
        from mpi4py import MPI
    except ImportError as error:
        print(f"mpi_halo.py: skipped: mpi4py is not installed ({error}); "
              "pip install --no-binary=mpi4py mpi4py, against the MPI that runs this")
        return 0

    # 1. Initialise MPI (importing mpi4py did) and pick the device ---------------
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        sys.exit("mpi_halo.py: run it on 2 ranks or more: mpiexec -n 4 python3 examples/python/mpi_halo.py")
    device = choose_device(arguments.device, node_local_rank(comm))
    # direct hands MPI the arrays' own pointers: on a GPU, only a GPU-aware MPI takes them
    gpu_aware = os.environ.get("MTSARRAY_MPI_GPU_AWARE") == "1"
    staged = arguments.transport == "staged" or (arguments.transport is None and device != "cpu" and not gpu_aware)
    left, right = (rank + size - 1) % size, (rank + 1) % size

    # 2. Build the TensorMap of this rank ----------------------------------------
    n, g = ATOMS, GHOSTS
    atom = np.concatenate([rank * n + np.arange(n),             # the owned atoms
                           left * n + n - g + np.arange(g),     # left's last G
                           right * n + np.arange(g)])           # right's first G
    atom = atom.astype(np.int32)
    blocks = []
    for rows, width, start in [(n + 2 * g, FEATURES, np.nan), (n + 2 * g, XYZ, np.nan), (n, XYZ, 0.0)]:
        # NaN shows a row nobody wrote; halo_force rows no neighbour holds stay 0
        blocks.append(metatensor.TensorBlock(
            values=np.full((rows, width), start),
            samples=metatensor.Labels(["atom"], atom[:rows, None]),
            components=[],
            properties=metatensor.Labels.range("n", width),
        ))
    keys = metatensor.Labels(["quantity"], np.arange(3, dtype=np.int32)[:, None])
    # the values, gradients and labels on the device, as mtsarray arrays
    tensor = mtsarray.tensormap_to(metatensor.TensorMap(keys, blocks), device)
    descriptor, force, halo_force = (tensor.block(i).values for i in range(3))  # views, owned by `tensor`

    # 3. The row lists of each neighbour -----------------------------------------
    # the owned rows the neighbours need (first G atoms to the left, last G to
    # the right) and the ghost rows received ones go to; any rows would do
    send_rows = np.concatenate([np.arange(g), n - g + np.arange(g)])
    ghost_rows = n + np.arange(2 * g)
    forward = Message(send_rows, ghost_rows, FEATURES, device, staged)
    reverse = Message(ghost_rows, send_rows, XYZ, device, staged)

    for step in range(STEPS):
        # the simulation: new descriptors of the owned atoms, forces on the ghosts
        write_rows(descriptor, 0, atom[:n], FEATURES, 1.0, step, device)
        write_rows(force, n, atom[n:], XYZ, -1.0, step, device)
        # Steps 4 to 6, forward: the owners' descriptors into the ghost rows
        forward.communicate(descriptor, descriptor, comm, left, right)
        check_rows(descriptor, n, atom[n:], FEATURES, 1.0, step, comm)
        # 7. Reverse communication: the forces on the ghost rows into the
        #    owners' halo_force (move_data copies; a code that sums adds them)
        reverse.communicate(force, halo_force, comm, left, right)
        check_rows(halo_force, 0, atom[:g], XYZ, -1.0, step, comm)
        check_rows(halo_force, n - g, atom[n - g:n], XYZ, -1.0, step, comm)

    # 8. A sum over the ranks: each rank's halo_force total, Allreduce-d as
    #    MtsArrays on the host (a (1,) array each way)
    local = mtsarray.from_dlpack(np.array([np.asarray(halo_force.copy("cpu")).sum()]))
    total = mtsarray.zeros((1,))
    comm.Allreduce(local, total, op=MPI.SUM)
    last = STEPS - 1
    expected = sum(-value(np.concatenate([r * n + np.arange(g), r * n + n - g + np.arange(g)]), XYZ, last).sum()
                   for r in range(size))
    if np.asarray(total)[0] != expected:
        print(f"mpi_halo.py: WRONG SUM {np.asarray(total)[0]!r} != {expected!r} on rank {rank}", file=sys.stderr,
              flush=True)
        comm.Abort(1)

    comm.Barrier()  # every rank has checked its values
    if rank == 0:
        print(f"mpi_halo.py: {size} ranks, {'CPU' if device == 'cpu' else 'GPU'} arrays, "
              f"{'staged' if staged else 'direct'} transport, every value checked, ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
