"""Making arrays and reading their metadata; every argument error."""

import fractions
import gc
import math
import re
import struct

import pytest
from conftest import require
from dlpack_capsules import element_bits

np = require("numpy")
mtsarray = require("mtsarray")

# every NumPy dtype with a DLPack equivalent
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros_and_full_for_every_dtype(dtype):
    zeros = mtsarray.zeros((3, 2), dtype=dtype)
    assert zeros.dtype == np.dtype(dtype)
    assert zeros.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(zeros), np.zeros((3, 2), dtype=dtype))

    value = {"b": True, "c": 1.5 - 2j, "f": -1.5}.get(np.dtype(dtype).kind, 7)
    full = mtsarray.full((4,), value, dtype=dtype)
    assert full.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(full), np.full((4,), value, dtype=dtype))


def test_dtypes_as_names_types_and_objects():
    for dtype in ["float32", np.float32, np.dtype("float32"), "f4"]:
        assert mtsarray.zeros(2, dtype=dtype).dtype == np.float32
    assert mtsarray.zeros(2).dtype == np.float64
    assert mtsarray.zeros(2, dtype="bfloat16").dtype == "bfloat16"


def test_full_infers_the_dtype_of_the_value():
    assert mtsarray.full(2, True).dtype == np.bool_
    assert mtsarray.full(2, 3).dtype == np.int64
    assert mtsarray.full(2, 3.0).dtype == np.float64
    assert mtsarray.full(2, 1j).dtype == np.complex128
    assert mtsarray.full(2, np.float32(1.5)).dtype == np.float32


def test_bfloat16_arrays():
    # NumPy has no bfloat16: the dtype is its DLPack name, and NumPy refuses the export
    array = mtsarray.full((3,), 1.5, dtype="bfloat16")
    assert array.dtype == "bfloat16"
    assert "dtype=bfloat16" in repr(array)
    with pytest.raises((BufferError, TypeError, RuntimeError)):
        np.from_dlpack(array)
    with pytest.raises(ValueError, match="bfloat16"):
        mtsarray.full(3, 1e39, dtype="bfloat16")


def test_bfloat16_fill_values_are_rounded_once_and_never_overflow():
    # the largest finite bfloat16 is (2 - 2**-7) * 2**127; halfway to 2**128
    # (and above) rounds to infinity: an error, like float16's overflow
    largest = (2 - 2**-7) * 2.0**127
    halfway = (2 - 2**-8) * 2.0**127
    below_halfway = np.nextafter(halfway, 0.0)
    cases = [
        (1.5, 0x3FC0),
        (-2.0, 0xC000),
        (largest, 0x7F7F),
        (-largest, 0xFF7F),
        (below_halfway, 0x7F7F),  # rounds down: rounding to float32 first would give the halfway tie, then inf
        (float("inf"), 0x7F80),
        (float("-inf"), 0xFF80),
        (2.0**-133, 0x0001),  # the smallest subnormal
        (2.0**-134, 0x0000),  # half of it: ties to even, zero
        (3 * 2.0**-135, 0x0001),  # above the tie: the smallest subnormal
        (1 + 2**-8, 0x3F80),  # a tie, to even
        (1 + 3 * 2**-8, 0x3F82),  # a tie, to even (up)
        (True, 0x3F80),
        (np.float16(0.5), 0x3F00),
    ]
    for value, bits in cases:
        array = mtsarray.full((2,), value, dtype="bfloat16")
        assert element_bits(array, 2) == [bits, bits], (value, hex(bits))
    nan = element_bits(mtsarray.full((1,), float("nan"), dtype="bfloat16"), 2)[0]
    assert nan & 0x7F80 == 0x7F80 and nan & 0x007F != 0
    for value in [halfway, -halfway, 3.4e38, -3.4e38, 1e39, 2**128, np.float32(3.4e38)]:
        expected = f"the fill value {value!r} can not be represented in bfloat16"
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            mtsarray.full(3, value, dtype="bfloat16")


def _bfloat16_reference(value):
    """The bits of the bfloat16 nearest to the float ``value`` (ties to even),
    computed exactly with fractions; None when that is an overflow of a
    finite value."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return 0x7F80 | (0x8000 if value < 0 else 0)
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    exact = abs(fractions.Fraction(value))
    if exact == 0:
        return sign
    exponent = max(math.floor(math.log2(exact)), -126)
    while fractions.Fraction(2) ** exponent > exact and exponent > -126:  # log2 may round up
        exponent -= 1
    ulp = fractions.Fraction(2) ** (exponent - 7)
    steps = round(exact / ulp)  # Fraction rounds half to even
    rounded = steps * ulp
    if rounded >= fractions.Fraction(2) ** 128:
        return None
    return sign | (struct.unpack("<I", struct.pack("<f", float(rounded)))[0] >> 16)


def _edge_values(rng, largest, halfway, smallest_subnormal):
    """Values at a floating dtype's edges, and random ones around them."""
    values = [largest, -largest, halfway, -halfway, np.nextafter(halfway, 0.0), np.nextafter(halfway, np.inf),
              smallest_subnormal, smallest_subnormal / 2, smallest_subnormal * 1.5, -smallest_subnormal,
              np.nextafter(smallest_subnormal / 2, 0.0), np.nextafter(smallest_subnormal / 2, 1.0),
              float("nan"), float("inf"), float("-inf"), 0.0, -0.0]
    for edge in (largest, halfway, smallest_subnormal):
        values += [float(edge * (1 + k * 2.0**-52)) for k in rng.integers(-64, 64, size=40)]
    values += [float(v) for v in np.exp2(rng.uniform(-160, 130, size=300)) * rng.choice([-1, 1], size=300)]
    return values


def test_full_at_every_floating_dtype_edge():
    # a seeded sweep of every floating dtype's edges: the largest finite
    # value, the first value that rounds to infinity (the halfway point
    # above it), NaN, the subnormals; against NumPy's conversion, and an
    # exact reference for bfloat16
    rng = np.random.default_rng(2024)
    for dtype in ["float16", "float32"]:
        info = np.finfo(dtype)
        largest = float(info.max)
        halfway = largest + float(info.max - np.nextafter(info.max, np.float64(0).astype(dtype))) / 2
        for value in _edge_values(rng, largest, halfway, float(info.smallest_subnormal)):
            with np.errstate(over="ignore"):
                expected = np.asarray(value, dtype=dtype)
            if math.isfinite(value) and not np.isfinite(expected):
                with pytest.raises(ValueError, match=f"can not be represented in {dtype}"):
                    mtsarray.full(1, value, dtype=dtype)
                continue
            result = np.asarray(mtsarray.full(1, value, dtype=dtype))[0]
            if math.isnan(value):
                assert np.isnan(result)
            else:
                assert result.tobytes() == expected.tobytes(), (dtype, value)
    for value in _edge_values(rng, (2 - 2**-7) * 2.0**127, (2 - 2**-8) * 2.0**127, 2.0**-133):
        expected = _bfloat16_reference(value)
        if expected is None:
            with pytest.raises(ValueError, match="can not be represented in bfloat16"):
                mtsarray.full(1, value, dtype="bfloat16")
            continue
        bits = element_bits(mtsarray.full(1, value, dtype="bfloat16"), 2)[0]
        if expected == "nan":
            assert bits & 0x7F80 == 0x7F80 and bits & 0x007F != 0
        else:
            assert bits == expected, (value, hex(bits), hex(expected))
    # float64: the first Python integer that rounds to infinity is the
    # halfway point above the largest double
    largest = 2**1024 - 2**971
    halfway = 2**1024 - 2**970
    assert np.asarray(mtsarray.full(1, halfway - 1, dtype="float64"))[0] == float(largest)
    for value in [halfway, -halfway]:
        with pytest.raises(ValueError, match="can not be represented in float64"):
            mtsarray.full(1, value, dtype="float64")


# (significant bits, largest exponent) of each floating dtype, bfloat16 included
FLOAT_FORMATS = {"float16": (11, 15), "bfloat16": (8, 127), "float32": (24, 127), "float64": (53, 1023),
                 "complex64": (24, 127), "complex128": (53, 1023)}


def _integer_reference(value, dtype):
    """The integer nearest to ``value`` that ``dtype`` holds (ties to even),
    computed exactly with fractions; None when it rounds to infinity."""
    precision, max_exponent = FLOAT_FORMATS[dtype]
    exact = abs(fractions.Fraction(value))
    if exact == 0:
        return 0
    exponent = exact.numerator.bit_length() - 1
    ulp = fractions.Fraction(2) ** max(exponent - (precision - 1), 0)
    rounded = round(exact / ulp) * ulp  # Fraction rounds half to even
    if rounded >= fractions.Fraction(2) ** (max_exponent + 1):
        return None
    return int(rounded) if value >= 0 else -int(rounded)


def _filled_integer(array, dtype):
    """The one element of ``array`` as an exact integer."""
    if dtype == "bfloat16":
        bits = element_bits(array, 2)[0]
        return int(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
    element = np.asarray(array)[0]
    if np.iscomplexobj(element):
        assert element.imag == 0
        element = element.real
    return int(element)


def test_integer_fill_values_are_rounded_once():
    # Python integers of any size, and NumPy integers, rounded once from the
    # exact integer: never through a double first (2**53 + 2**45 + 1 is a
    # double's tie, which rounds to even at 2**53 + 2**45, then bfloat16's
    # tie rounds that down to 2**53, where 2**53 + 2**46 is nearest)
    assert _filled_integer(mtsarray.full((1,), 2**53 + 2**45 + 1, dtype="bfloat16"), "bfloat16") == 2**53 + 2**46
    assert _filled_integer(mtsarray.full((1,), 2**100 + 2**76 + 1, dtype="float32"), "float32") == 2**100 + 2**77
    assert _filled_integer(mtsarray.full((1,), 2**100 + 2**76 + 1, dtype="complex64"), "complex64") == 2**100 + 2**77
    assert _filled_integer(mtsarray.full((1,), np.int64(2**53 + 2**45 + 1), dtype="bfloat16"), "bfloat16") == (
        2**53 + 2**46
    )
    rng = np.random.default_rng(40)
    for dtype, (precision, max_exponent) in FLOAT_FORMATS.items():
        values = []
        for bits in list(range(1, 70)) + [max_exponent, max_exponent + 1, max_exponent + 2, 200, 1100]:
            top = 1 << (bits - 1)
            # ties, just above and below them, and random integers of `bits` bits
            if bits > precision + 1:
                half = 1 << (bits - precision - 1)
                for k in (1, 2, 3):
                    tie = top + (2 * k - 1) * half
                    values += [tie - 1, tie, tie + 1]
            values += [top + int(rng.integers(0, 2**62)) % top for _ in range(8)]
        values += [-v for v in values[::7]] + [0]
        for value in values:
            expected = _integer_reference(value, dtype)
            kinds = [value] + ([np.int64(value)] if -(2**63) <= value < 2**63 else [])
            kinds += [np.uint64(value)] if 0 <= value < 2**64 else []
            for given in kinds:
                if expected is None:
                    with pytest.raises(ValueError, match=f"can not be represented in {dtype}"):
                        mtsarray.full((1,), given, dtype=dtype)
                    continue
                result = _filled_integer(mtsarray.full((1,), given, dtype=dtype), dtype)
                assert result == expected, (dtype, value, type(given).__name__, result, expected)


def test_full_with_python_integers_beyond_64_bits():
    # NumPy keeps them as objects: the error says the value does not fit
    for dtype in ["uint64", "int64", "int8", "bool"]:
        with pytest.raises(ValueError, match=f"the fill value 18446744073709551616 can not be represented in {dtype}"):
            mtsarray.full((2,), 2**64, dtype=dtype)
    with pytest.raises(ValueError, match="can not be represented in float64"):
        mtsarray.full((2,), 10**400, dtype="float64")
    with pytest.raises(ValueError, match="can not be represented in float16"):
        mtsarray.full((2,), 2**64, dtype="float16")
    np.testing.assert_array_equal(np.asarray(mtsarray.full((2,), 2**64, dtype="float64")), [2.0**64, 2.0**64])


def test_full_refuses_values_the_dtype_can_not_hold():
    with pytest.raises(ValueError, match="can not be represented in int32"):
        mtsarray.full(3, 2.5, dtype="int32")
    with pytest.raises(ValueError, match="can not be represented in int8"):
        mtsarray.full(3, 300, dtype="int8")
    with pytest.raises(ValueError, match="can not be represented in float16"):
        mtsarray.full(3, 1e10, dtype="float16")
    with pytest.raises(ValueError, match="can not be represented in bool"):
        mtsarray.full(3, 2, dtype="bool")
    with pytest.raises(ValueError, match="can not be represented in int64"):
        mtsarray.full(3, float("nan"), dtype="int64")
    with pytest.raises(ValueError, match="can not be represented in uint8"):
        mtsarray.full(3, np.int64(-1), dtype="uint8")
    with pytest.raises(ValueError, match="can not be represented in float64"):
        mtsarray.full(3, 1 + 1j, dtype="float64")
    with pytest.raises(ValueError, match="must be a scalar"):
        mtsarray.full(3, [1.0, 2.0])
    with pytest.raises(TypeError, match="must be a number"):
        mtsarray.full(3, "one", dtype="float64")
    with pytest.raises(TypeError):
        mtsarray.full(3, "one")
    # exact values of another kind are fine
    np.testing.assert_array_equal(np.asarray(mtsarray.full(2, 3.0, dtype="int8")), [3, 3])
    np.testing.assert_array_equal(np.asarray(mtsarray.full(2, 2 + 0j, dtype="float32")), [2, 2])
    np.testing.assert_array_equal(np.asarray(mtsarray.full(2, 1, dtype="bool")), [True, True])
    np.testing.assert_array_equal(np.asarray(mtsarray.full(2, 2**64 - 1, dtype="uint64")), [2**64 - 1] * 2)
    np.testing.assert_array_equal(np.asarray(mtsarray.full(2, float("inf"))), [np.inf, np.inf])


def test_shapes():
    for shape, expected in [((), ()), (0, (0,)), (5, (5,)), ((2, 0, 3), (2, 0, 3)), ([2, 3, 4, 1], (2, 3, 4, 1)),
                            ((np.int64(2), np.int32(3)), (2, 3))]:
        array = mtsarray.full(shape, 1.5)
        assert array.shape == expected
        assert array.ndim == len(expected)
        np.testing.assert_array_equal(np.asarray(array), np.full(expected, 1.5))


@pytest.mark.parametrize("shape, error", [
    ((2, -1), ValueError),
    ((2.5,), TypeError),
    ("abc", TypeError),
    ((True, 2), TypeError),
    ((2**70,), OverflowError),
    (None, TypeError),
])
def test_invalid_shapes(shape, error):
    with pytest.raises(error):
        mtsarray.zeros(shape)


def test_too_large_shape_is_an_mtsarray_error():
    with pytest.raises(mtsarray.Error, match="mtsarray"):
        mtsarray.zeros((2**40, 2**40))


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, "datetime64[s]", "timedelta64[s]", object, str,
                                   "S3", "V8", ">f8", "not a dtype", 3.5])
def test_unsupported_dtypes(dtype):
    with pytest.raises(TypeError):
        mtsarray.zeros(2, dtype=dtype)


def test_devices():
    array = mtsarray.zeros(2, device="cpu")
    assert array.device == "cpu"
    assert array.__dlpack_device__() == (mtsarray.DLDeviceType.kDLCPU, 0)
    assert isinstance(array.__dlpack_device__()[0], mtsarray.DLDeviceType)
    assert mtsarray.zeros(2, device=(1, 0)).device == "cpu"
    assert mtsarray.zeros(2, device="cpu:0").device == "cpu"
    assert mtsarray.zeros(2, device=("cpu", 0)).device == "cpu"


@pytest.mark.parametrize("name", ["cuda", "rocm", "cuda_managed"])
@pytest.mark.parametrize("index", [0, 1])
def test_a_name_and_an_index_is_the_device_of_that_string(name, index):
    # ("cuda", 1) means "cuda:1", like torch.device("cuda", 1)
    if index < mtsarray.device_count(name):
        assert mtsarray.zeros(2, device=(name, index)).device == f"{name}:{index}"
        return
    with pytest.raises(mtsarray.Error) as expected:
        mtsarray.zeros(2, device=f"{name}:{index}")
    with pytest.raises(mtsarray.Error) as error:
        mtsarray.zeros(2, device=(name, index))
    assert str(error.value) == str(expected.value)


@pytest.mark.parametrize("device, error", [
    ("gpu", ValueError),
    ("cuda:", ValueError),
    ("cuda:x", ValueError),
    ("cpu:1", ValueError),
    ("cuda:-1", ValueError),
    ((1,), ValueError),
    ((1, -3), ValueError),
    (("cpu", 1), ValueError),
    (("cuda:0", 1), ValueError),
    (("cuda", -1), ValueError),
    (("tpu", 0), ValueError),
    (("cuda", "1"), TypeError),
    (("cuda", 1.0), TypeError),
    (3, TypeError),
    (None, TypeError),
])
def test_invalid_devices(device, error):
    with pytest.raises(error):
        mtsarray.zeros(2, device=device)


@pytest.mark.parametrize("name", ["cuda", "rocm"])
def test_unavailable_backends_say_why(name):
    if mtsarray.backend_available(name):
        pytest.skip(f"the {name} backend is available here")
    reason = mtsarray.backend_unavailable_reason(name)
    assert reason != ""
    with pytest.raises(mtsarray.Error) as error:
        mtsarray.zeros(2, device=f"{name}:0")
    assert reason in str(error.value)


def test_backend_available_takes_names_devices_and_numbers():
    assert mtsarray.backend_available("cpu")
    assert mtsarray.backend_unavailable_reason("cpu") == ""
    assert mtsarray.backend_available(mtsarray.DLDeviceType.kDLCPU)
    assert mtsarray.backend_available("cuda:1") == mtsarray.backend_available("cuda")
    assert mtsarray.backend_available(2) == mtsarray.backend_available("cuda")
    with pytest.raises(ValueError):
        mtsarray.backend_available("tpu")
    with pytest.raises(TypeError):
        mtsarray.backend_available(1.5)


def test_device_count():
    assert mtsarray.device_count("cpu") == 1
    assert mtsarray.device_count(mtsarray.DLDeviceType.kDLCPU) == 1
    for name in ("cuda", "rocm"):
        count = mtsarray.device_count(name)
        assert isinstance(count, int) and count >= 0
        # a GPU type counts its devices exactly when its backend can be used
        assert (count > 0) == mtsarray.backend_available(name), mtsarray.backend_unavailable_reason(name)
        assert mtsarray.device_count(f"{name}:1") == count
        assert mtsarray.device_count(f"{name}_host") == count
    assert mtsarray.device_count(2) == mtsarray.device_count("cuda")
    if mtsarray.device_count("cuda") > 0:
        last = mtsarray.device_count("cuda") - 1
        assert mtsarray.zeros(2, device=("cuda", last)).device == f"cuda:{last}"
    with pytest.raises(mtsarray.Error, match="mtsarray_device_count: mtsarray has no backend for opencl devices"):
        mtsarray.device_count(4)
    with pytest.raises(ValueError):
        mtsarray.device_count("tpu")
    with pytest.raises(TypeError):
        mtsarray.device_count(1.5)


def test_repr_shows_shape_dtype_device_and_stream():
    assert repr(mtsarray.zeros((4, 3), dtype="float32")) == \
        "MtsArray(shape=(4, 3), dtype=float32, device='cpu', stream=-1)"


def test_len():
    assert len(mtsarray.zeros((4, 3))) == 4
    with pytest.raises(TypeError, match="0-d"):
        len(mtsarray.zeros(()))


def test_reshape_in_place():
    array = mtsarray.from_dlpack(np.arange(12.0))
    array.reshape((3, 4))
    assert array.shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(array), np.arange(12.0).reshape(3, 4))
    array.reshape((2, -1))
    assert array.shape == (2, 6)
    array.reshape(12)
    assert array.shape == (12,)
    with pytest.raises(mtsarray.Error, match="reshape"):
        array.reshape((5, 2))
    with pytest.raises(ValueError):
        array.reshape((5, -1))
    with pytest.raises(ValueError, match="only one"):
        array.reshape((-1, -1))
    assert array.shape == (12,)


def test_swap_axes_in_place():
    values = np.arange(24.0).reshape(2, 3, 4)
    array = mtsarray.from_dlpack(values)
    array.swap_axes(0, 2)
    assert array.shape == (4, 3, 2)
    np.testing.assert_array_equal(np.asarray(array), values.swapaxes(0, 2))
    array.swap_axes(-1, -2)
    np.testing.assert_array_equal(np.asarray(array), values.swapaxes(0, 2).swapaxes(-1, -2))
    with pytest.raises(mtsarray.Error, match="swap_axes"):
        array.swap_axes(0, 3)
    with pytest.raises(ValueError, match="out of range"):
        array.swap_axes(-4, 0)


def test_copy():
    values = np.arange(6.0).reshape(2, 3)
    array = mtsarray.from_dlpack(values)
    copied = array.copy()
    assert copied.data_ptr != array.data_ptr
    np.testing.assert_array_equal(np.asarray(copied), values)
    values[0, 0] = -1
    assert np.asarray(copied)[0, 0] == 0
    assert array.copy("cpu").device == "cpu"
    with pytest.raises(ValueError):
        array.copy("nowhere")
    if not mtsarray.backend_available("cuda"):
        with pytest.raises(mtsarray.Error):
            array.copy("cuda")


def test_streams_on_the_cpu():
    array = mtsarray.zeros(3)
    assert array.stream == -1
    array.stream = -1
    array.stream = None  # the device's default: none on the CPU
    assert array.stream == -1
    for invalid in [0, 1, 3, 12345]:
        with pytest.raises(mtsarray.Error, match="stream"):
            array.stream = invalid
    with pytest.raises(TypeError):
        array.stream = 1.5
    with pytest.raises(TypeError):
        array.stream = True
    with pytest.raises(OverflowError):
        array.stream = 2**70
    array.synchronize()


def test_stream_objects_are_read_for_their_handle():
    class CudaStreamProtocol:
        def __cuda_stream__(self):
            return (0, 12345)

    array = mtsarray.zeros(3)
    with pytest.raises(mtsarray.Error, match="12345"):  # a CUDA handle is no CPU stream
        array.stream = CudaStreamProtocol()
    with pytest.raises(TypeError, match="stream object"):
        array.stream = object()


@pytest.mark.parametrize("returned, error", [
    ((0,), ValueError),  # the handle missing
    ((), ValueError),
    (None, TypeError),
    (12345, TypeError),
    ("0, 12345", TypeError),
])
def test_a_broken_cuda_stream_protocol_is_a_type_or_value_error(returned, error):
    class BrokenCudaStreamProtocol:
        def __cuda_stream__(self):
            return returned

    array = mtsarray.zeros(3)
    with pytest.raises(error, match="__cuda_stream__"):
        array.stream = BrokenCudaStreamProtocol()
    assert array.stream == -1


def test_no_public_constructor():
    with pytest.raises(TypeError):
        mtsarray.MtsArray()


def test_numpy_conversion():
    array = mtsarray.full((2, 2), 3.0)
    view = np.asarray(array)
    assert view.ctypes.data == array.data_ptr
    assert np.asarray(array, dtype=np.float32).dtype == np.float32
    assert np.array(array, copy=True).ctypes.data != array.data_ptr
    with pytest.raises(ValueError, match="copy=False"):
        array.__array__(dtype=np.float32, copy=False)


def test_many_arrays_come_and_go():
    # ownership: each array is destroyed once, when its last reference goes
    for _ in range(200):
        array = mtsarray.full((100,), 1.0)
        copy = array.copy()
        del array
        np.testing.assert_array_equal(np.asarray(copy), 1.0)
    gc.collect()
