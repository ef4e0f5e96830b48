"""The Python example and benchmarks of the repository, run as a user runs
them (skipped when the package is tested outside the repository, from an
sdist)."""

import pathlib
import py_compile
import subprocess
import sys

import pytest
from conftest import optional

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPOSITORY / "examples" / "python" / "training_step.py"
QUICK_START = REPOSITORY / "examples" / "python" / "quick_start.py"
TORCH_BENCH = REPOSITORY / "bench" / "torch_move_data.py"
OVERHEAD_BENCH = REPOSITORY / "bench" / "python_overhead.py"
OPERATIONS_BENCH = REPOSITORY / "bench" / "tensormap_operations.py"

pytestmark = pytest.mark.skipif(not EXAMPLE.is_file(), reason="not in the mtsarray repository (an sdist?)")
torch = optional("torch")


def run(script, *arguments, timeout=600):
    result = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True,
                            timeout=timeout, cwd=REPOSITORY)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("script", [EXAMPLE, QUICK_START, TORCH_BENCH, OVERHEAD_BENCH, OPERATIONS_BENCH],
                         ids=lambda path: path.name)
def test_scripts_compile(script):
    py_compile.compile(str(script), doraise=True, cfile=None, optimize=-1)


def test_quick_start():
    # the Python quick start of the documentation, as a user runs it
    output = run(QUICK_START)
    assert "quick_start: every value is right" in output
    assert "as expected:" in output and "out of range" in output
    output = run(QUICK_START, "--device", "auto")  # a GPU when there is one
    assert "quick_start: every value is right" in output


@pytest.mark.skipif(torch is None, reason="torch is not installed: the example needs PyTorch")
def test_training_step_example():
    output = run(EXAMPLE, "--steps", "3")
    assert "steps on" in output


def test_training_step_without_torch_says_why():
    if torch is not None:
        pytest.skip("torch is installed: test_training_step_example runs it")
    assert "skipped: PyTorch is not installed" in run(EXAMPLE)


def test_torch_move_data_benchmark():
    # a small run on the CPU where torch is importable; otherwise it says why
    output = run(TORCH_BENCH, "--count", "2000", "--rounds", "1", "--device", "cpu")
    if torch is None:
        assert "skipped: PyTorch is not installed" in output
    else:
        assert "== targets:" in output


def test_python_overhead_benchmark():
    output = run(OVERHEAD_BENCH, "--rounds", "1")
    assert "== targets:" in output


def test_tensormap_operations_benchmark():
    # one small TensorMap: every operation on every kind of array, each
    # result checked against NumPy's (the script fails on a wrong value)
    output = run(OPERATIONS_BENCH, "--smoke")
    assert "== targets:" in output
    assert "keys_to_properties" in output and "components_to_properties" in output
