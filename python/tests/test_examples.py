"""The Python example and benchmarks of the repository, run as a user runs
them (skipped when the package is tested outside the repository, from an
sdist)."""

import os
import pathlib
import py_compile
import shutil
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
MPI_HALO = REPOSITORY / "examples" / "python" / "mpi_halo.py"
BRIDGES = REPOSITORY / "examples" / "python" / "tensormap_bridges.py"
NUMPY_LOOP = REPOSITORY / "examples" / "python" / "training_loop_numpy.py"
TORCH_DISTRIBUTED = REPOSITORY / "examples" / "python" / "torch_distributed.py"

pytestmark = pytest.mark.skipif(not EXAMPLE.is_file(), reason="not in the mtsarray repository (an sdist?)")
torch = optional("torch")
mpi4py = optional("mpi4py")


def run(script, *arguments, timeout=600):
    result = subprocess.run([sys.executable, str(script), *arguments], capture_output=True, text=True,
                            timeout=timeout, cwd=REPOSITORY)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("script", [EXAMPLE, QUICK_START, MPI_HALO, BRIDGES, NUMPY_LOOP, TORCH_DISTRIBUTED, TORCH_BENCH,
                                    OVERHEAD_BENCH, OPERATIONS_BENCH],
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


def test_training_loop_numpy_example():
    # the NumPy-only loop of the training-loops guide: it checks every gathered
    # batch against NumPy's indexing and exits 1 unless the loss falls 100x
    output = run(NUMPY_LOOP)
    assert "training_loop_numpy: 160 steps" in output


def test_tensormap_bridges_example():
    # the guide "TensorMaps in Python", as a user runs it (its torch and
    # metatensor-torch parts where those are installed; a GPU with --device auto)
    output = run(BRIDGES, "--device", "auto")
    assert "NumPy and metatensor-operations: every value is right, no copy" in output
    if torch is not None:
        assert "PyTorch on" in output


@pytest.mark.skipif(torch is None, reason="torch is not installed: the example needs PyTorch")
def test_training_step_example():
    output = run(EXAMPLE, "--steps", "3")
    assert "steps on" in output


def test_training_step_without_torch_says_why():
    if torch is not None:
        pytest.skip("torch is installed: test_training_step_example runs it")
    assert "skipped: PyTorch is not installed" in run(EXAMPLE)


@pytest.mark.skipif(torch is None, reason="torch is not installed: the example needs PyTorch")
def test_torch_distributed_example_on_gloo():
    # as a user runs it: the script starts its 2 processes, each reduces its
    # TensorMap with torch.distributed on the mtsarray arrays' own memory and
    # checks the sums (a wrong one, or a copy, fails the script)
    output = run(TORCH_DISTRIBUTED, "--backend", "gloo", timeout=300)
    assert "torch_distributed: 2 processes, gloo, every block's values and gradients summed" in output


def test_torch_distributed_without_torch_says_why():
    if torch is not None:
        pytest.skip("torch is installed: test_torch_distributed_example_on_gloo runs it")
    assert "skipped: PyTorch is not installed" in run(TORCH_DISTRIBUTED)


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
    # the C exchange API and __dlpack__, side by side
    assert "managed_tensor_from_py_object_no_sync + deleter (C)" in output
    assert "x the exchange API)" in output


def test_tensormap_operations_benchmark():
    # one small TensorMap: every operation on every kind of array, each
    # result checked against NumPy's (the script fails on a wrong value)
    output = run(OPERATIONS_BENCH, "--smoke")
    assert "== targets:" in output
    assert "keys_to_properties" in output and "components_to_properties" in output


# What Open MPI needs in containers and CI: run as root, shared memory only,
# no single-copy mechanism (ptrace), no ssh agent for local ranks
# (cmake/mpi-programs.cmake says why, for the C example's tests)
OPEN_MPI_ENVIRONMENT = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_btl_base_warn_component_unused": "0",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_btl_sm_single_copy_mechanism": "none",
    "OMPI_MCA_plm_rsh_agent": "false",
}


def mpiexec():
    """The mpiexec command line for local ranks, or a skip with the reason
    (a failure under CI, where scripts/setup.sh installs mpi4py)."""
    missing = ("mpi4py is not installed (scripts/setup.sh builds it against the system's MPI)" if mpi4py is None
               else "mpiexec was not found" if shutil.which("mpiexec") is None else None)
    if missing is not None:
        if os.environ.get("MTSARRAY_PYTHON_TESTS_REQUIRED") == "1":
            pytest.fail(f"the mpi4py example must run under CI: {missing}", pytrace=False)
        pytest.skip(missing)
    version = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True).stdout
    flags = ["--oversubscribe", "--bind-to", "none"] if "Open MPI" in version or "OpenRTE" in version else []
    return ["mpiexec", *flags]


@pytest.mark.parametrize("ranks, arguments", [(2, []), (4, []), (2, ["--transport", "staged"])],
                         ids=["2-ranks", "4-ranks", "2-ranks-staged"])
def test_mpi_halo_example(ranks, arguments):
    command = [*mpiexec(), "-n", str(ranks), sys.executable, str(MPI_HALO), "--device", "cpu", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPOSITORY,
                            env={**os.environ, **OPEN_MPI_ENVIRONMENT})
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    transport = "staged" if arguments else "direct"
    assert f"{ranks} ranks, CPU arrays, {transport} transport, every value checked, ok" in result.stdout


def test_mpi_halo_ranks_take_the_gpu_of_their_node_local_rank(monkeypatch):
    # the example's own choice, with a node of 4 CUDA GPUs and no ROCm one
    import importlib.util

    import mtsarray

    spec = importlib.util.spec_from_file_location("mpi_halo_example", MPI_HALO)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setattr(mtsarray, "backend_available", lambda kind: kind in ("cpu", "cuda"))
    monkeypatch.setattr(mtsarray, "device_count", lambda kind: 4 if kind == "cuda" else 0)
    assert [example.choose_device("auto", local_rank) for local_rank in range(6)] == \
        ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1"]
    assert example.choose_device("cuda", 2) == "cuda:2"
    assert example.choose_device("cpu", 2) == "cpu"
    with pytest.raises(SystemExit, match="--device rocm"):
        example.choose_device("rocm", 0)
    monkeypatch.setattr(mtsarray, "backend_available", lambda kind: kind == "cpu")
    assert example.choose_device("auto", 3) == "cpu"
