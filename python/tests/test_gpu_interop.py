"""DLPack between mtsarray and PyTorch, CuPy and JAX, on GPUs and the CPU.

The GPU cases run where mtsarray has a usable CUDA backend AND the framework
sees a CUDA device; otherwise they skip with the reason. What is checked:
- zero-copy both ways (same device pointer, writes visible both ways), and
  data that outlives its MtsArray (released exactly once);
- the stream hand-off: a slow kernel keeps the producer's stream busy, the
  test checks it is still running when the hand-off returns (nothing blocked
  the host, and an ordering bug would read stale values), then the consumer
  reads on its own stream and must see the producer's result;
- from_dlpack passes the new array's stream to the producer;
- stream objects that die before the memory they were used for.
"""

import gc

import pytest
from conftest import optional, require

np = require("numpy")
mtsarray = require("mtsarray")
torch = optional("torch")
cupy = optional("cupy")
jax = optional("jax")

N = 1 << 22  # big enough that the copies take a visible time
SLEEP_CYCLES = 200_000_000  # ~0.1 s on current GPUs

CUDA_AVAILABLE = mtsarray.backend_available("cuda")
CUDA_REASON = mtsarray.backend_unavailable_reason("cuda")


def _skip_reason(module, name, sees_a_gpu):
    if module is None:
        return f"{name} is not installed"
    if not CUDA_AVAILABLE:
        return f"the mtsarray CUDA backend is not usable: {CUDA_REASON}"
    if not sees_a_gpu():
        return f"{name} sees no CUDA device"
    return None


TORCH_SKIP = _skip_reason(torch, "torch", lambda: torch.cuda.is_available() and torch.version.cuda is not None)
CUPY_SKIP = _skip_reason(cupy, "cupy", lambda: cupy.cuda.runtime.getDeviceCount() > 0)
JAX_SKIP = _skip_reason(jax, "jax", lambda: any(d.platform == "gpu" for d in jax.devices()))

needs_torch_cuda = pytest.mark.skipif(TORCH_SKIP is not None, reason=str(TORCH_SKIP))
needs_cupy_cuda = pytest.mark.skipif(CUPY_SKIP is not None, reason=str(CUPY_SKIP))
needs_jax_cuda = pytest.mark.skipif(JAX_SKIP is not None, reason=str(JAX_SKIP))
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def host_values(array):
    """The array's values on the host (a copy, after the array's work)."""
    return np.from_dlpack(array, device="cpu", copy=True)


def expected_moves(values, shape, movements):
    expected = np.zeros(shape, dtype=values.dtype)
    for sample_in, sample_out, start_in, start_out, length in movements:
        expected[sample_out, ..., start_out:start_out + length] = values[sample_in, ..., start_in:start_in + length]
    return expected


# ---- PyTorch, on the CPU --------------------------------------------------------

@needs_torch
def test_torch_cpu_round_trip_is_zero_copy():
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    array = mtsarray.from_dlpack(tensor)
    assert array.data_ptr == tensor.data_ptr()
    back = torch.from_dlpack(array)
    assert back.data_ptr() == tensor.data_ptr()
    back[0, 0] = 42
    assert tensor[0, 0] == 42
    output = mtsarray.zeros((2, 4), dtype="float32")
    output.move_data(array, np.array([[2, 0, 0, 0, 4], [0, 1, 1, 2, 2]]))
    np.testing.assert_array_equal(np.asarray(output), [[8, 9, 10, 11], [0, 0, 1, 2]])


@needs_torch
def test_torch_cpu_tensors_of_every_kind():
    # through PyTorch's DLPack C exchange API when it has one, or __dlpack__
    strided = torch.arange(30, dtype=torch.float64).reshape(5, 6).t()
    array = mtsarray.from_dlpack(strided)
    assert array.data_ptr != strided.data_ptr()  # copied: mtsarray arrays are C-contiguous
    np.testing.assert_array_equal(np.asarray(array), strided.numpy())
    for dtype in [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
                  torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128]:
        tensor = torch.ones(3, dtype=dtype)
        array = mtsarray.from_dlpack(tensor)
        assert array.data_ptr == tensor.data_ptr()
        assert torch.equal(torch.from_dlpack(array), tensor)
    bfloat16 = mtsarray.from_dlpack(torch.full((2,), 1.5, dtype=torch.bfloat16))
    assert bfloat16.dtype == "bfloat16"
    assert torch.equal(torch.from_dlpack(bfloat16), torch.full((2,), 1.5, dtype=torch.bfloat16))
    assert torch.equal(torch.from_dlpack(mtsarray.full((2,), 1.5, dtype="bfloat16")),
                       torch.full((2,), 1.5, dtype=torch.bfloat16))


@needs_torch
def test_torch_tensors_torch_refuses_to_export():
    with pytest.raises(BufferError, match="gradient"):
        mtsarray.from_dlpack(torch.ones(3, requires_grad=True))
    with pytest.raises(BufferError, match="conjugate"):
        mtsarray.from_dlpack(torch.ones(3, dtype=torch.complex64).conj())
    with pytest.raises(mtsarray.Error, match="stream"):
        mtsarray.from_dlpack(torch.ones(3), stream=5)


@needs_torch
def test_torch_cpu_exports_outlive_the_array():
    array = mtsarray.full((1000,), 3.0)
    tensor = torch.from_dlpack(array)
    del array
    gc.collect()
    assert tensor.sum().item() == 3000.0


# ---- PyTorch, on a GPU ----------------------------------------------------------

@needs_torch_cuda
def test_torch_from_dlpack_zero_copy():
    array = mtsarray.full((4, 3), 2.5, device="cuda")
    tensor = torch.from_dlpack(array)
    assert tensor.device == torch.device("cuda", 0)
    assert tensor.dtype == torch.float64
    assert tuple(tensor.shape) == (4, 3)
    assert tensor.data_ptr() == array.data_ptr
    assert torch.equal(tensor, torch.full((4, 3), 2.5, dtype=torch.float64, device="cuda"))

    tensor[1, 2] = 7.0  # torch writes on its current stream ...
    torch.cuda.current_stream().synchronize()
    assert host_values(array)[1, 2] == 7.0  # ... mtsarray reads it

    source = mtsarray.full((1, 3), -1.0, device="cuda")
    array.move_data(source, [[0, 3, 0, 0, 3]])  # mtsarray writes ...
    array.synchronize()
    assert torch.equal(tensor[3].cpu(), torch.full((3,), -1.0, dtype=torch.float64))


@needs_torch_cuda
def test_torch_data_outlives_the_array():
    # the tensor keeps the memory alive; the array must be released exactly once
    array = mtsarray.full((1000,), 3.0, device="cuda")
    tensor = torch.from_dlpack(array)
    del array
    gc.collect()
    others = [mtsarray.full((1000,), -1.0, device="cuda") for _ in range(8)]
    assert tensor.sum().item() == 3000.0
    del others


@needs_torch_cuda
def test_torch_stream_hand_off_orders_the_consumer_after_the_producer():
    producer = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    values = mtsarray.full((1, N), 7.0, device="cuda")
    out = mtsarray.zeros((1, N), device="cuda")
    values.synchronize()
    out.synchronize()
    out.stream = producer  # a stream object: kept alive by the array
    assert out.stream == producer.cuda_stream

    with torch.cuda.stream(producer):
        torch.cuda._sleep(SLEEP_CYCLES)
    out.move_data(values, [[0, 0, 0, 0, N]])  # queued behind the sleep, returns at once
    assert not producer.query(), "the producer stream finished before the hand-off: the test would prove nothing"

    with torch.cuda.stream(consumer):
        tensor = torch.from_dlpack(out)  # torch passes consumer.cuda_stream
        assert not producer.query(), "__dlpack__ blocked the host"
        total = tensor.sum()
    consumer.synchronize()
    assert total.item() == 7.0 * N


@needs_torch_cuda
def test_from_dlpack_passes_the_array_stream_to_torch():
    # torch's work on its current stream must be ordered before the new array's
    consumer = torch.cuda.Stream()
    tensor = torch.zeros((1, N), dtype=torch.float64, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    tensor.fill_(5.0)  # queued behind the sleep on torch's current stream
    array = mtsarray.from_dlpack(tensor, stream=consumer)
    assert array.stream == consumer.cuda_stream
    assert array.data_ptr == tensor.data_ptr()
    assert not torch.cuda.current_stream().query(), "from_dlpack blocked the host"
    out = mtsarray.zeros((1, N), device="cuda")
    out.stream = consumer
    out.move_data(array, [[0, 0, 0, 0, N]])  # on the consumer stream, after torch's fill
    np.testing.assert_array_equal(host_values(out), np.full((1, N), 5.0))


@needs_torch_cuda
def test_torch_to_mtsarray_zero_copy_then_move_data():
    values = torch.arange(24, dtype=torch.float64, device="cuda").reshape(4, 2, 3)
    array = mtsarray.from_dlpack(values, stream=torch.cuda.current_stream())
    assert array.data_ptr == values.data_ptr()
    assert array.device == "cuda:0"
    output = mtsarray.zeros((2, 2, 5), device="cuda")
    output.stream = torch.cuda.current_stream()
    movements = [[3, 0, 0, 2, 3], [1, 1, 1, 0, 2]]
    output.move_data(array, movements)
    np.testing.assert_array_equal(host_values(output), expected_moves(values.cpu().numpy(), (2, 2, 5), movements))


@needs_torch_cuda
def test_a_captured_copy_from_a_numpy_view_mtsarray_must_copy_is_refused():
    # a replay could only upload the copy made at capture time, never what
    # the view holds then: refused, while a C-contiguous, writable source is
    # captured and read at every replay
    side = torch.cuda.Stream()
    destination = mtsarray.zeros((16, 8), device="cuda")
    destination.stream = side
    batch = np.zeros((16, 8))
    strided = np.zeros((8, 16)).T
    read_only = np.zeros((16, 8))
    read_only.flags.writeable = False
    with torch.cuda.stream(side):
        destination.copy_from(batch)  # warm-up outside the capture
    side.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        destination.copy_from(batch)
        for view in (strided, read_only):
            with pytest.raises(mtsarray.Error, match="must copy"):
                destination.copy_from(view)
    batch[...] = 42.0
    with torch.cuda.stream(side):
        graph.replay()
    side.synchronize()
    np.testing.assert_array_equal(host_values(destination), batch)
    # outside a capture, both are copied
    values = np.arange(128.0).reshape(8, 16).T
    destination.copy_from(values)
    np.testing.assert_array_equal(host_values(destination), values)


@needs_torch_cuda
def test_torch_non_contiguous_tensor_is_copied():
    base = torch.arange(30, dtype=torch.float32, device="cuda").reshape(5, 6)
    view = base.t()
    array = mtsarray.from_dlpack(view)
    assert array.data_ptr != view.data_ptr()
    np.testing.assert_array_equal(host_values(array), view.cpu().numpy())


# ---- CuPy -----------------------------------------------------------------------

_SPIN_KERNEL = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@needs_cupy_cuda
def test_cupy_from_dlpack_zero_copy():
    array = mtsarray.full((5, 2), 4, dtype="int32", device="cuda")
    view = cupy.from_dlpack(array)
    assert view.data.ptr == array.data_ptr
    assert view.dtype == np.int32
    np.testing.assert_array_equal(cupy.asnumpy(view), np.full((5, 2), 4, dtype=np.int32))
    view[0, 0] = -9
    cupy.cuda.get_current_stream().synchronize()
    assert host_values(array)[0, 0] == -9


@needs_cupy_cuda
def test_cupy_stream_hand_off():
    # a CuPy producer stream handing an array to a CuPy consumer stream
    spin = cupy.RawKernel(_SPIN_KERNEL, "spin")
    producer = cupy.cuda.Stream(non_blocking=True)
    consumer = cupy.cuda.Stream(non_blocking=True)
    values = mtsarray.full((1, N), 3.0, device="cuda")
    out = mtsarray.zeros((1, N), device="cuda")
    values.synchronize()
    out.synchronize()
    out.stream = producer
    assert out.stream == producer.ptr
    with producer:
        spin((1,), (1,), (np.int64(SLEEP_CYCLES),))
    out.move_data(values, [[0, 0, 0, 0, N]])
    assert not producer.done, "the producer stream finished before the hand-off"
    with consumer:
        view = cupy.from_dlpack(out)  # cupy passes consumer.ptr
        assert not producer.done, "__dlpack__ blocked the host"
        total = view.sum()
    consumer.synchronize()
    assert float(total) == 3.0 * N


@needs_cupy_cuda
def test_cupy_stream_object_dies_before_the_memory():
    # the array keeps its stream object alive, and moves its release to the
    # default stream when it goes: the export outlives both
    stream = cupy.cuda.Stream(non_blocking=True)
    array = mtsarray.full((1000,), 2.0, device="cuda")
    array.stream = stream
    view = cupy.from_dlpack(array)
    del array, stream
    gc.collect()
    assert float(view.sum()) == 2000.0
    del view
    gc.collect()
    cupy.cuda.Device().synchronize()


@needs_cupy_cuda
def test_cupy_to_mtsarray_then_move_data():
    values = cupy.arange(12, dtype=cupy.float64).reshape(3, 4)
    array = mtsarray.from_dlpack(values, stream=cupy.cuda.get_current_stream())
    assert array.data_ptr == values.data.ptr
    output = mtsarray.zeros((3, 4), device="cuda")
    output.move_data(array, [[2, 0, 0, 0, 4], [0, 2, 1, 1, 3]])
    expected = np.zeros((3, 4))
    expected[0] = np.arange(8, 12)
    expected[2, 1:] = [1, 2, 3]
    np.testing.assert_array_equal(host_values(output), expected)


# ---- JAX ------------------------------------------------------------------------

@needs_jax_cuda
def test_jax_round_trip():
    import jax.numpy as jnp

    gpu = next(d for d in jax.devices() if d.platform == "gpu")
    values = jax.device_put(jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4), gpu)
    array = mtsarray.from_dlpack(values)
    assert array.device == "cuda:0"
    np.testing.assert_array_equal(host_values(array), np.arange(12.0, dtype=np.float32).reshape(3, 4))
    back = jax.dlpack.from_dlpack(array)
    np.testing.assert_array_equal(np.asarray(back), np.arange(12.0, dtype=np.float32).reshape(3, 4))
