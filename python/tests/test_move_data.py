"""MtsArray.move_data against a NumPy reference: random plans for every
dtype, every way of giving the movements, and every error."""

import pytest
from conftest import require

np = require("numpy")
mtsarray = require("mtsarray")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def random_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values = rng.standard_normal(shape) * 100
    if dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def random_plan(rng, n_in, n_out, properties_in, properties_out):
    """Movements whose output ranges never overlap (the only case with one
    answer on every device): each output sample's properties are cut into
    random segments, some left alone; each segment reads a random input
    sample and range. Shuffled."""
    movements = []
    for sample_out in range(n_out):
        start = 0
        while start < properties_out:
            length = int(rng.integers(1, min(properties_out - start, properties_in) + 1))
            if rng.random() < 0.8:
                sample_in = int(rng.integers(0, n_in))
                start_in = int(rng.integers(0, properties_in - length + 1))
                movements.append((sample_in, sample_out, start_in, start, length))
            start += length
    movements = np.array(movements, dtype=np.int64).reshape(-1, 5)
    return movements[rng.permutation(len(movements))]


def reference(output, input, movements):
    expected = output.copy()
    for sample_in, sample_out, start_in, start_out, length in movements:
        expected[sample_out, ..., start_out:start_out + length] = input[sample_in, ..., start_in:start_in + length]
    return expected


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("components", [(), (3,), (2, 3)])
def test_random_plans_match_numpy(dtype, components):
    rng = np.random.default_rng(abs(hash((dtype, components))) % 2**32)
    for _ in range(4):
        n_in, n_out = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        properties_in, properties_out = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        input = random_values(rng, (n_in, *components, properties_in), dtype)
        initial = random_values(rng, (n_out, *components, properties_out), dtype)
        movements = random_plan(rng, n_in, n_out, properties_in, properties_out)

        output = mtsarray.from_dlpack(initial.copy())
        output.move_data(mtsarray.from_dlpack(input), movements)
        np.testing.assert_array_equal(np.from_dlpack(output), reference(initial, input, movements))


def test_cpu_applies_overlapping_movements_in_order():
    # documented for the CPU only (on a GPU one of them wins)
    input = mtsarray.from_dlpack(np.arange(6.0).reshape(3, 2))
    output = mtsarray.zeros((1, 2))
    output.move_data(input, np.array([[0, 0, 0, 0, 2], [2, 0, 0, 0, 2], [1, 0, 1, 1, 1]]))
    np.testing.assert_array_equal(np.asarray(output), [[4.0, 3.0]])


def movements_in_every_form(movements):
    as_list = movements.tolist()
    fortran = np.asfortranarray(movements)
    strided = np.repeat(movements, 2, axis=0)[::2]
    return {
        "int64": movements,
        "uint64": movements.astype(np.uint64),
        "int32": movements.astype(np.int32),
        "uint16": movements.astype(np.uint16),
        "big-endian int64": movements.astype(">i8"),
        "list": as_list,
        "tuple": tuple(tuple(row) for row in as_list),
        "fortran": fortran,
        "strided": strided,
        "intp": movements.astype(np.intp),
    }


def test_every_form_of_movements():
    rng = np.random.default_rng(7)
    input = rng.standard_normal((6, 2, 5))
    movements = random_plan(rng, 6, 4, 5, 7)
    expected = reference(np.zeros((4, 2, 7)), input, movements)
    source = mtsarray.from_dlpack(input)
    for name, form in movements_in_every_form(movements).items():
        output = mtsarray.zeros((4, 2, 7))
        output.move_data(source, form)
        np.testing.assert_array_equal(np.asarray(output), expected, err_msg=name)


def test_no_movements():
    output = mtsarray.full((2, 3), 1.0)
    source = mtsarray.zeros((2, 3))
    for empty in [[], np.zeros((0, 5), dtype=np.int64), np.zeros((0,), dtype=np.int64), (), np.zeros((0, 5))]:
        output.move_data(source, empty)
    np.testing.assert_array_equal(np.asarray(output), np.ones((2, 3)))


@pytest.mark.parametrize("shape", [(5, 0), (0, 7), (0, 5, 1), (0, 0), (1, 0)])
def test_empty_movements_of_another_shape_are_refused(shape):
    output = mtsarray.full((2, 3), 1.0)
    source = mtsarray.zeros((2, 3))
    with pytest.raises(ValueError, match=r"shape \(N, 5\)"):
        output.move_data(source, np.zeros(shape, dtype=np.int64))
    np.testing.assert_array_equal(np.asarray(output), np.ones((2, 3)))


@pytest.mark.parametrize("movements, match", [
    # NumPy makes float64 of these, or object arrays: the message names the value
    ([[-1, 2**63, 0, 0, 1]], r"movements\[0, 0\] \(sample_in\) is negative: -1"),
    ([[2**64, 0, 0, 0, 1]], r"movements\[0, 0\] \(sample_in\) = 18446744073709551616 does not fit in 64 bits"),
    ([[0, 0, 0, 0, 1], [0, -2**63 - 1, 0, 0, 1]], r"movements\[1, 1\] \(sample_out\) is negative"),
])
def test_python_integers_out_of_every_integer_type(arrays, movements, match):
    source, output = arrays
    with pytest.raises(ValueError, match=match):
        output.move_data(source, movements)


def test_python_integers_that_fit_in_uint64_only(arrays):
    # 2**63 beside small numbers: NumPy makes float64 of them; they are
    # integers, and the library names the one out of range
    source, output = arrays
    with pytest.raises(mtsarray.Error, match="sample_in = 9223372036854775808 is out of range"):
        output.move_data(source, [[2**63, 0, 0, 0, 1]])


def test_the_input_is_read_not_modified():
    values = np.arange(6.0).reshape(2, 3)
    source = mtsarray.from_dlpack(values)
    output = mtsarray.zeros((2, 3))
    output.move_data(source, [[1, 0, 0, 0, 3]])
    np.testing.assert_array_equal(values, np.arange(6.0).reshape(2, 3))
    # an array can be its own input
    output.move_data(output, [[0, 1, 0, 0, 3]])
    np.testing.assert_array_equal(np.asarray(output), [[3, 4, 5], [3, 4, 5]])


# ---- errors: the output stays untouched ------------------------------------------

@pytest.fixture
def arrays():
    source = mtsarray.from_dlpack(np.arange(6.0).reshape(2, 3))
    output = mtsarray.full((2, 3), 5.0)
    yield source, output
    np.testing.assert_array_equal(np.asarray(output), np.full((2, 3), 5.0), err_msg="the output was modified")


@pytest.mark.parametrize("movements, match", [
    ([[2, 0, 0, 0, 1]], "sample_in = 2 is out of range"),
    ([[0, 2, 0, 0, 1]], "sample_out = 2 is out of range"),
    ([[0, 0, 1, 0, 3]], "properties"),
    ([[0, 0, 0, 1, 3]], "properties"),
    ([[0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 5, 0, 0, 1]], "movement 2"),
    (np.array([[0, 0, 0, 0, 2**63]], dtype=np.uint64), "goes past the 3 properties"),
])
def test_out_of_range_movements(arrays, movements, match):
    source, output = arrays
    with pytest.raises(mtsarray.Error, match=match):
        output.move_data(source, movements)


@pytest.mark.parametrize("movements, error, match", [
    ([[0, -1, 0, 0, 1]], ValueError, r"movements\[0, 1\] \(sample_out\) is negative: -1"),
    (np.array([[0, 0, 0, 0, 1], [0, 0, -3, 0, 1]]), ValueError, r"movements\[1, 2\] \(properties_start_in\)"),
    ([[0, 0, 0, 0]], ValueError, r"shape \(N, 5\)"),
    ([0, 0, 0, 0, 1], ValueError, r"shape \(N, 5\)"),
    (np.zeros((2, 5, 1), dtype=np.int64), ValueError, r"shape \(N, 5\)"),
    ([[0.0, 0.0, 0.0, 0.0, 1.0]], TypeError, "integers"),
    ([[True, False, False, False, True]], TypeError, "integers"),
    ([["a", "b", "c", "d", "e"]], TypeError, "integers"),
    ([[0, 0, 0], [0, 0]], ValueError, "inhomogeneous"),
    (None, TypeError, "integers"),
])
def test_invalid_movements(arrays, movements, error, match):
    source, output = arrays
    with pytest.raises(error, match=match):
        output.move_data(source, movements)


def test_arrays_that_do_not_match(arrays):
    source, output = arrays
    with pytest.raises(mtsarray.Error, match="dtype"):
        output.move_data(mtsarray.zeros((2, 3), dtype="float32"), [[0, 0, 0, 0, 1]])
    with pytest.raises(mtsarray.Error):
        output.move_data(mtsarray.zeros((2, 4, 3)), [[0, 0, 0, 0, 1]])
    with pytest.raises(TypeError):
        output.move_data(np.ones((2, 3)), [[0, 0, 0, 0, 1]])
    with pytest.raises(TypeError):
        output.move_data(None, [[0, 0, 0, 0, 1]])


@pytest.mark.parametrize("call", ["move_data", "MovePlan", "MovePlan output", "plan"])
def test_a_numpy_input_says_to_wrap_it_with_from_dlpack(call):
    # the arrays of move_data and of a plan are mtsarray arrays: a NumPy array
    # gets a TypeError that names the argument and says how to make one
    output = mtsarray.zeros((2, 3), dtype="float64")
    raw = np.arange(12.0).reshape(4, 3)
    movements = np.array([[3, 0, 0, 0, 3]], dtype=np.int64)
    with pytest.raises(TypeError, match=r"mtsarray\.from_dlpack") as error:
        if call == "move_data":
            output.move_data(raw, movements)
        elif call == "MovePlan":
            mtsarray.MovePlan(output, raw, movements)
        elif call == "MovePlan output":
            mtsarray.MovePlan(np.zeros((2, 3)), mtsarray.from_dlpack(raw), movements)
        else:
            mtsarray.MovePlan(output, mtsarray.from_dlpack(raw), movements)(output, raw)
    assert "numpy.ndarray" in str(error.value)
    assert np.array_equal(np.from_dlpack(output), np.zeros((2, 3)))  # untouched
