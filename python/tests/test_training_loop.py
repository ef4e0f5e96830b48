"""The training-loop scenario of the GPU check (scripts/training_loop.py):
PyTorch and mtsarray on one GPU, a captured step replayed, threads that
come and go, values checked against NumPy at every step. A short run here
where PyTorch and mtsarray see a CUDA GPU; the GPU check runs it whole, and
under compute-sanitizer. Its reference is checked everywhere."""

import importlib.util
import pathlib

import pytest
from conftest import require

np = require("numpy")
mtsarray = require("mtsarray")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "training_loop.py"


def load_script():
    spec = importlib.util.spec_from_file_location("training_loop", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_moves_like_mtsarray_on_the_cpu():
    loop = load_script()
    rng = np.random.default_rng(7)
    movements = loop.movements_of(rng)
    assert len(set(movements[:, 1])) == loop.ROWS, "every sample goes to its own place"
    values = rng.standard_normal((loop.ROWS, loop.COLUMNS))
    expected = np.zeros((loop.GATHERED, loop.COLUMNS))
    loop.apply_movements(expected, values, movements)
    gathered = mtsarray.zeros((loop.GATHERED, loop.COLUMNS))
    gathered.move_data(mtsarray.from_dlpack(values), movements)
    assert np.array_equal(np.asarray(gathered), expected)


def test_a_short_training_loop():
    loop = load_script()
    reason = loop.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    loop.run(steps=30, threads=4, hold_fraction=0.5, memory_section=False)
