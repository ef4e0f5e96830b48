"""A seeded fuzzer of mtsarray.from_dlpack with hand-made capsules (see
dlpack_capsules.py): negative and huge ndim, NULL shapes and strides, huge
and negative dimensions, strides whose products overflow, byte offsets, any
dtype, device, version and flags, NULL data.

Invariants, each run:
  - the import either gives an array or raises mtsarray.Error (never
    another exception, never a crash: scripts/fuzz.sh runs this in its own
    process and fails on a non-zero exit);
  - an array has the capsule's shape, and the tensor's deleter has run
    exactly once after the array is gone (at once on an error).
The capsule of the case being run is printed before it runs (with --log), so
a crash leaves its reproducer as the log's last line.

Usage: python fuzz_dlpack_capsules.py [--runs N] [--seed S] [--log FILE]
"""

import argparse
import gc
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mtsarray  # noqa: E402
from dlpack_capsules import Capsule  # noqa: E402

MAX_BYTES = 1 << 20

DTYPES = [(0, 8, 1), (0, 32, 1), (0, 64, 1), (1, 16, 1), (2, 16, 1), (2, 32, 1), (2, 64, 1), (4, 16, 1),
          (5, 64, 1), (5, 128, 1), (6, 8, 1)]


def dimension(rng):
    return rng.choice([0, 1, 1, 2, 3, 4, 5, -1, -(2**63), 2**62, 2**63 - 1, 2**31, 2**40])


def stride(rng):
    return rng.choice([0, 1, 2, 3, 5, 8, -1, -3, 2**62, 2**63 - 1, -(2**63)])


def make_case(rng):
    case = {}
    shape_kind = rng.randrange(8)
    ndim = rng.choice([0, 1, 2, 3, 4, 5, 64, 65, 100])
    shape = [dimension(rng) if rng.randrange(3) == 0 else rng.randrange(1, 4) for _ in range(ndim)]
    if shape_kind == 0:
        case["ndim"] = rng.choice([-1, -(2**31), 1, 2, 7, 2**31 - 1])
        case["shape"] = None  # NULL, whatever ndim says
    elif shape_kind == 1:
        case["ndim"] = rng.choice([-1, -(2**31)])
        case["shape"] = shape or [1]
    else:
        case["shape"] = shape
    if rng.randrange(3) != 0 and case["shape"] is not None:
        case["strides"] = [stride(rng) if rng.randrange(3) == 0 else rng.randrange(0, 6)
                           for _ in range(len(case["shape"]))]
    case["dtype"] = rng.choice(DTYPES) if rng.randrange(6) else (rng.randrange(256), rng.randrange(256),
                                                                 rng.choice([0, 1, 2]))
    case["device"] = (1, 0) if rng.randrange(8) else (rng.choice([2, 3, 4, 10, 13, 99]), rng.randrange(-1, 3))
    case["version"] = (1, rng.randrange(3)) if rng.randrange(8) else (rng.choice([0, 2, 99]), 0)
    case["flags"] = rng.choice([0, 0, 1, 2, 3, 2**63])
    case["byte_offset"] = rng.choice([0, 0, 0, 8, 2**63])
    # memory-safe: the buffer holds every byte the tensor addresses, or data
    # is NULL (a non-empty tensor with NULL data is refused before any read)
    extent = addressed_bytes(case)
    if extent is None or extent > MAX_BYTES or rng.randrange(20) == 0:
        case["null_data"] = True
        case["data_bytes"] = 8
    else:
        case["data_bytes"] = extent
    return case


def addressed_bytes(case):
    shape = case.get("shape")
    if shape is None or case.get("ndim", len(shape)) != len(shape):
        return 0
    code, bits, lanes = case["dtype"]
    element = max(1, (bits * max(lanes, 1) + 7) // 8)
    if any(size < 0 for size in shape):
        return 0
    if any(size == 0 for size in shape):
        return case["byte_offset"]
    strides = case.get("strides")
    if strides is None:
        count = 1
        for size in shape:
            count *= size
        return case["byte_offset"] + count * element
    if any(s < 0 for size, s in zip(shape, strides) if size > 1):
        return None
    last = sum((size - 1) * s for size, s in zip(shape, strides))
    return case["byte_offset"] + (last + 1) * element


def run_case(case):
    made = Capsule(**case)
    try:
        array = mtsarray.from_dlpack(made.capsule)
    except mtsarray.Error:
        assert made.deleted == 1, f"rejected, the deleter ran {made.deleted} times"
        return "rejected"
    assert list(array.shape) == list(case["shape"] or []), (array.shape, case["shape"])
    del array
    gc.collect()
    assert made.deleted == 1, f"imported, the deleter ran {made.deleted} times after the array was gone"
    return "imported"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", default=None)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    log = open(arguments.log, "w") if arguments.log else None
    outcomes = {"rejected": 0, "imported": 0}
    for run in range(arguments.runs):
        case = make_case(rng)
        if log:
            log.write(f"{run}: {case!r}\n")
            log.flush()
        outcomes[run_case(case)] += 1
    print(f"{arguments.runs} capsules: {outcomes['imported']} imported, {outcomes['rejected']} rejected "
          f"(seed {arguments.seed})")


if __name__ == "__main__":
    main()
