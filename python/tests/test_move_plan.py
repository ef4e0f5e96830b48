"""mtsarray.MovePlan against a NumPy reference, MtsArray.copy_from, and the
thread count of host work."""

import threading

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
    return (rng.standard_normal(shape) * 100).astype(dtype)


def random_movements(rng, n_in, n_out, properties_in, properties_out):
    """One movement per output sample at most (scattered, random ranges)."""
    movements = []
    for sample_out in rng.permutation(n_out)[: int(rng.integers(0, n_out + 1))]:
        length = int(rng.integers(0, min(properties_in, properties_out) + 1))
        movements.append((int(rng.integers(0, n_in)), int(sample_out),
                          int(rng.integers(0, properties_in - length + 1)),
                          int(rng.integers(0, properties_out - length + 1)), length))
    return np.array(movements, dtype=np.int64).reshape(-1, 5)


def reference(output, input, movements):
    expected = output.copy()
    for sample_in, sample_out, start_in, start_out, length in movements:
        expected[sample_out, ..., start_out:start_out + length] = input[sample_in, ..., start_in:start_in + length]
    return expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_plan_matches_numpy(dtype):
    rng = np.random.default_rng(26)
    for _ in range(6):
        components = tuple(int(c) for c in rng.integers(0, 3, size=int(rng.integers(0, 2))))
        n_in, n_out = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        p_in, p_out = int(rng.integers(0, 9)), int(rng.integers(0, 9))
        movements = random_movements(rng, n_in, n_out, p_in, p_out)
        input_values = random_values(rng, (n_in, *components, p_in), dtype)
        output_values = random_values(rng, (n_out, *components, p_out), dtype)
        input = mtsarray.from_dlpack(input_values.copy())
        output = mtsarray.from_dlpack(output_values.copy())
        plan = mtsarray.MovePlan(output, input, movements)
        for step in range(3):
            plan(output, input)
            np.testing.assert_array_equal(np.asarray(output), reference(output_values, input_values, movements))
        # more samples than planned
        extra = random_values(rng, (n_out + 3, *components, p_out), dtype)
        larger = mtsarray.from_dlpack(extra.copy())
        plan(larger, input)
        np.testing.assert_array_equal(np.asarray(larger), reference(extra, input_values, movements))


def test_plan_keeps_its_own_movements():
    input = mtsarray.from_dlpack(np.arange(12.0).reshape(4, 3))
    output = mtsarray.zeros((2, 3))
    movements = np.array([[3, 0, 0, 0, 3], [1, 1, 0, 0, 3]], dtype=np.int64)
    plan = mtsarray.MovePlan(output, input, movements)
    movements[:] = 0
    plan(output, input)
    np.testing.assert_array_equal(np.asarray(output), [[9.0, 10.0, 11.0], [3.0, 4.0, 5.0]])
    # lists and uint64 arrays are read like move_data's
    plan = mtsarray.MovePlan(output, input, [(0, 1, 0, 0, 3)])
    plan(output, input)
    np.testing.assert_array_equal(np.asarray(output)[1], [0.0, 1.0, 2.0])
    empty = mtsarray.MovePlan(output, input, [])
    empty(output, input)


def test_plan_errors():
    input = mtsarray.zeros((4, 3))
    output = mtsarray.full((2, 3), 7.0)
    with pytest.raises(mtsarray.Error, match="sample_in = 4 is out of range"):
        mtsarray.MovePlan(output, input, [(4, 0, 0, 0, 3)])
    with pytest.raises(ValueError, match="is negative"):
        mtsarray.MovePlan(output, input, [(0, -1, 0, 0, 3)])
    with pytest.raises(ValueError, match=r"shape \(N, 5\)"):
        mtsarray.MovePlan(output, input, [(0, 1, 0, 0)])
    with pytest.raises(TypeError):
        mtsarray.MovePlan(output, input, [(0.5, 1, 0, 0, 1)])
    with pytest.raises(mtsarray.Error, match="different dtypes"):
        mtsarray.MovePlan(output, mtsarray.zeros((4, 3), dtype="float32"), [])

    plan = mtsarray.MovePlan(output, input, [(3, 1, 0, 0, 3)])
    with pytest.raises(mtsarray.Error, match="another dtype"):
        plan(mtsarray.zeros((2, 3), dtype="float32"), input)
    with pytest.raises(mtsarray.Error, match="axes after the samples"):
        plan(mtsarray.zeros((2, 4)), input)
    with pytest.raises(mtsarray.Error, match="too few samples"):
        plan(output, mtsarray.zeros((3, 3)))
    with pytest.raises(mtsarray.Error, match="too few samples"):
        plan(mtsarray.zeros((1, 3)), input)
    with pytest.raises(TypeError):
        plan(np.zeros((2, 3)), input)
    # nothing was written
    np.testing.assert_array_equal(np.asarray(output), np.full((2, 3), 7.0))


def test_plan_from_several_threads():
    rng = np.random.default_rng(3)
    input_values = rng.standard_normal((2000, 16))
    input = mtsarray.from_dlpack(input_values)
    movements = np.stack([rng.integers(0, 2000, 2000), np.arange(2000), np.zeros(2000, dtype=np.int64),
                          np.zeros(2000, dtype=np.int64), np.full(2000, 16)], axis=1)
    outputs = [mtsarray.zeros((2000, 16)) for _ in range(8)]
    plan = mtsarray.MovePlan(outputs[0], input, movements)
    threads = [threading.Thread(target=lambda o=o: [plan(o, input) for _ in range(10)]) for o in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for output in outputs:
        np.testing.assert_array_equal(np.asarray(output), input_values[movements[:, 0]])


def test_copy_from_between_arrays():
    rng = np.random.default_rng(4)
    values = rng.standard_normal((5, 3, 4))
    source = mtsarray.from_dlpack(values.copy())
    destination = mtsarray.zeros((5, 3, 4))
    pointer = destination.data_ptr
    destination.copy_from(source)
    np.testing.assert_array_equal(np.asarray(destination), values)
    assert destination.data_ptr == pointer, "copy_from wrote into new memory"
    with pytest.raises(mtsarray.Error, match="another shape"):
        destination.copy_from(mtsarray.zeros((5, 3, 5)))
    with pytest.raises(mtsarray.Error, match="another dtype"):
        destination.copy_from(mtsarray.zeros((5, 3, 4), dtype="float32"))
    np.testing.assert_array_equal(np.asarray(destination), values)


def test_copy_from_numpy_arrays():
    rng = np.random.default_rng(5)
    destination = mtsarray.zeros((6, 4), dtype="int32")
    values = rng.integers(-100, 100, size=(6, 4), dtype=np.int32)
    destination.copy_from(values)
    np.testing.assert_array_equal(np.asarray(destination), values)
    # strided (a transposed view): read in its logical order
    strided = rng.integers(-100, 100, size=(4, 6), dtype=np.int32).T
    destination.copy_from(strided)
    np.testing.assert_array_equal(np.asarray(destination), strided)
    # read-only, and a capsule: what mtsarray must copy first goes to
    # mtsarray_copy_into as NumPy's array, which makes that copy
    read_only = rng.integers(-100, 100, size=(6, 4), dtype=np.int32)
    read_only.flags.writeable = False
    destination.copy_from(read_only)
    np.testing.assert_array_equal(np.asarray(destination), read_only)
    destination.copy_from(strided.__dlpack__())
    np.testing.assert_array_equal(np.asarray(destination), strided)
    # a strided source of another shape or dtype: an error, nothing written
    with pytest.raises(mtsarray.Error, match="another shape"):
        destination.copy_from(np.zeros((6, 5), dtype=np.int32)[:, ::2].T)
    with pytest.raises(mtsarray.Error, match="another dtype"):
        destination.copy_from(np.zeros((4, 6), dtype=np.int64).T)
    np.testing.assert_array_equal(np.asarray(destination), strided)
    with pytest.raises(TypeError, match="DLPack"):
        destination.copy_from([[1, 2, 3, 4]] * 6)
    with pytest.raises(mtsarray.Error, match="another dtype"):
        destination.copy_from(values.astype(np.int64))


def test_a_plan_is_freed_once_and_never_used_after():
    # the plan is its object's: it can not be made twice over (which would
    # drop the first one unfreed), used before it is made, or freed by hand
    input = mtsarray.from_dlpack(np.arange(6.0).reshape(3, 2))
    output = mtsarray.zeros((3, 2))
    plan = mtsarray.MovePlan(output, input, [(0, 2, 0, 0, 2)])
    with pytest.warns(RuntimeWarning, match="already-initialized"), pytest.raises(TypeError):
        plan.__init__(output, input, [(2, 0, 0, 0, 2)])
    plan(output, input)
    np.testing.assert_array_equal(np.asarray(output), [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    blank = mtsarray.MovePlan.__new__(mtsarray.MovePlan)
    with pytest.warns(RuntimeWarning, match="uninitialized"), pytest.raises(TypeError):
        blank(output, input)
    del blank
    assert not hasattr(plan, "free") and not hasattr(plan, "close")

    # plans made and dropped on several threads at once, executed meanwhile
    errors = []

    def make_and_drop():
        try:
            for _ in range(200):
                own = mtsarray.zeros((3, 2))
                made = mtsarray.MovePlan(own, input, [(1, 0, 0, 0, 2)])
                made(own, input)
                assert np.asarray(own)[0].tolist() == [2.0, 3.0]
                del made
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=make_and_drop) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_num_threads():
    before = mtsarray.get_num_threads()
    try:
        mtsarray.set_num_threads(3)
        assert mtsarray.get_num_threads() == 3
        mtsarray.set_num_threads(1)
        assert mtsarray.get_num_threads() == 1
        for bad in (0, -1, 5000, 2**40):
            with pytest.raises(mtsarray.Error):
                mtsarray.set_num_threads(bad)
        assert mtsarray.get_num_threads() == 1
    finally:
        mtsarray.set_num_threads(before)
