"""mtsarray.from_dlpack with hand-made capsules: the extension reads nothing
of a tensor that the library has not validated, so a malformed tensor gets
the library's error (mtsarray.Error) and never crashes the interpreter. Each
import runs in a child interpreter: a crash fails the test instead of ending
the run."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import require

require("numpy")
mtsarray = require("mtsarray")

HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(code):
    script = "import sys; sys.path.insert(0, %r)\n" % HERE + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def import_in_child(capsule_arguments):
    result = run_child(f"""
        import mtsarray
        from dlpack_capsules import Capsule
        made = Capsule(**{capsule_arguments})
        try:
            array = mtsarray.from_dlpack(made.capsule)
            print("imported", array.shape)
        except mtsarray.Error as error:
            print("error:", error)
        print("deleted", made.deleted)
    """)
    assert result.returncode == 0, (
        f"the import crashed the interpreter (exit {result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


@pytest.mark.parametrize("arguments, message", [
    # shape NULL with axes (the extension read it before the library did)
    ("dict(ndim=2, shape=None, strides=[1, 1])", "shape is NULL with ndim = 2"),
    ("dict(ndim=3, shape=None)", "shape is NULL with ndim = 3"),
    ("dict(ndim=2, shape=None, flags=1)", "shape is NULL with ndim = 2"),
    ("dict(ndim=-5, shape=[1])", "ndim = -5"),
    # products of hostile dimensions overflow 64 bits
    ("dict(shape=[2**62, 2**62], strides=[1, 2**62])", "is too large"),
    ("dict(shape=[3, -2], strides=[1, 1])", "shape[1] = -2"),
    ("dict(shape=[2**62, 8], strides=[8, 1])", "is too large"),
])
def test_malformed_capsules_give_the_library_error(arguments, message):
    output = import_in_child(arguments)
    assert "error:" in output and message in output, output
    assert "deleted 1" in output, output


def test_many_axes_import():
    output = import_in_child("dict(shape=[1] * 100 + [2], strides=[2] * 100 + [1], data_bytes=16)")
    assert "imported (" + "1, " * 100 + "2)" in output, output


def test_the_capsule_fuzzer_finds_nothing():
    # a short run of the fuzzer (scripts/fuzz.sh runs it longer)
    result = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_dlpack_capsules.py"), "--runs", "300",
                             "--seed", "1"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
