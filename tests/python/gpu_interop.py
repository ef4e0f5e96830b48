"""DLPack interoperability of CUDA mtsarray arrays with torch and cupy.

Runs only where libmtsarray has a usable CUDA backend AND torch (with CUDA) or
cupy is installed; otherwise every case skips with the reason printed, and
the file exits 77 (ctest: skipped). What is checked:
- mtsarray -> torch/cupy through `from_dlpack`: values, zero-copy (same device
  pointer, writes visible both ways), data alive after the array is destroyed;
- the stream hand-off: the consumer passes its stream as a DLPack number,
  mtsarray makes it wait (event, no host block) for work still queued on the
  array's own stream. The producer stream is held busy with a sleep kernel,
  and the test checks the work really was pending at hand-off time, so an
  ordering bug reads stale zeros instead of passing by luck;
- torch/cupy -> mtsarray through `mtsarray_from_dlpack` (zero-copy), then
  move_data into another mtsarray array, values read back on the host.
"""

import gc
import sys

import support

support.require("numpy")

import unittest  # noqa: E402

import numpy as np  # noqa: E402

import mtsarray_ctypes as mts  # noqa: E402


try:
    import torch
except ImportError:
    torch = None

try:
    import cupy
except ImportError:
    cupy = None

CUDA_AVAILABLE, CUDA_REASON = mts.backend_available(mts.kDLCUDA)
CUDA0 = mts.DLDevice(mts.kDLCUDA, 0)

N = 1 << 22  # big enough that the copies take a visible time


def host_values(array):
    """The array's values on the host, through as_dlpack(CPU)."""
    return np.from_dlpack(_HostExport(array)).copy()


class _HostExport:
    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return (mts.kDLCPU, 0)

    def __dlpack__(self, **kwargs):
        return mts.versioned_capsule(self.array.as_dlpack(device=mts.CPU))


def _skip_reason(module, name, module_has_cuda):
    if not CUDA_AVAILABLE:
        return f"the mtsarray CUDA backend is not usable: {CUDA_REASON}"
    if module is None:
        return f"{name} is not installed"
    if not module_has_cuda():
        return f"{name} sees no CUDA device"
    return None


TORCH_SKIP = _skip_reason(torch, "torch", lambda: torch.cuda.is_available() and torch.version.cuda is not None)
CUPY_SKIP = _skip_reason(cupy, "cupy", lambda: cupy.cuda.runtime.getDeviceCount() > 0)


@unittest.skipIf(TORCH_SKIP is not None, TORCH_SKIP or "")
class TorchInterop(unittest.TestCase):
    def test_from_dlpack_zero_copy(self):
        array = mts.MtsArray.full((4, 3), 2.5, device=CUDA0)
        tensor = torch.from_dlpack(array)
        self.assertEqual(tensor.device, torch.device("cuda", 0))
        self.assertEqual(tensor.dtype, torch.float64)
        self.assertEqual(tuple(tensor.shape), (4, 3))
        self.assertEqual(tensor.data_ptr(), array.data_ptr)
        self.assertTrue(torch.equal(tensor, torch.full((4, 3), 2.5, dtype=torch.float64, device="cuda")))

        tensor[1, 2] = 7.0  # torch writes on its current stream ...
        torch.cuda.current_stream().synchronize()
        self.assertEqual(host_values(array)[1, 2], 7.0)  # ... mtsarray reads it

        source = mts.MtsArray.full((1, 3), -1.0, device=CUDA0)
        array.move_data(source, [(0, 3, 0, 0, 3)])  # mtsarray writes ...
        array.synchronize()
        self.assertTrue(torch.equal(tensor[3].cpu(), torch.full((3,), -1.0, dtype=torch.float64)))

    def test_data_outlives_the_array(self):
        array = mts.MtsArray.full((1000,), 3.0, device=CUDA0)
        tensor = torch.from_dlpack(array)
        array.destroy()
        gc.collect()
        others = [mts.MtsArray.full((1000,), -1.0, device=CUDA0) for _ in range(8)]
        self.assertEqual(tensor.sum().item(), 3000.0)
        del others

    def test_stream_hand_off_orders_consumer_after_producer(self):
        producer = torch.cuda.Stream()
        consumer = torch.cuda.Stream()
        values = mts.MtsArray.full((1, N), 7.0, device=CUDA0)
        values.synchronize()
        out = mts.MtsArray.zeros((1, N), device=CUDA0)
        out.synchronize()
        out.stream = producer.cuda_stream
        self.assertEqual(out.stream, producer.cuda_stream)

        # N values copied on the producer stream, queued behind a sleep
        with torch.cuda.stream(producer):
            torch.cuda._sleep(200_000_000)
        out.move_data(values, [(0, 0, 0, 0, N)])
        self.assertFalse(producer.query(), "the producer stream finished before the hand-off: "
                         "the test would prove nothing")

        with torch.cuda.stream(consumer):
            tensor = torch.from_dlpack(out)  # torch passes consumer.cuda_stream
            total = tensor.sum()
        consumer.synchronize()
        self.assertEqual(total.item(), 7.0 * N)

    def test_torch_to_mtsarray_zero_copy_then_move_data(self):
        values = torch.arange(24, dtype=torch.float64, device="cuda").reshape(4, 2, 3)
        stream = torch.cuda.current_stream()
        number = 1 if stream.cuda_stream == 0 else stream.cuda_stream
        array = mts.MtsArray.from_dlpack(values, stream=number)
        self.assertEqual(array.data_ptr, values.data_ptr())
        self.assertEqual(array.device.device_type, mts.kDLCUDA)

        output = mts.MtsArray.zeros((2, 2, 5), device=CUDA0)
        movements = [(3, 0, 0, 2, 3), (1, 1, 1, 0, 2)]
        output.move_data(array, movements)
        expected = np.zeros((2, 2, 5))
        reference = values.cpu().numpy()
        for sample_in, sample_out, start_in, start_out, length in movements:
            expected[sample_out, :, start_out:start_out + length] = \
                reference[sample_in, :, start_in:start_in + length]
        np.testing.assert_array_equal(host_values(output), expected)

    def test_non_contiguous_tensor_is_copied(self):
        base = torch.arange(30, dtype=torch.float32, device="cuda").reshape(5, 6)
        view = base.t()
        array = mts.MtsArray.from_dlpack(view)
        self.assertNotEqual(array.data_ptr, view.data_ptr())
        np.testing.assert_array_equal(host_values(array), view.cpu().numpy())


_SPIN_KERNEL = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@unittest.skipIf(CUPY_SKIP is not None, CUPY_SKIP or "")
class CupyInterop(unittest.TestCase):
    def test_from_dlpack_zero_copy(self):
        array = mts.MtsArray.full((5, 2), 4, dtype=mts.INT32, device=CUDA0)
        view = cupy.from_dlpack(array)
        self.assertEqual(view.data.ptr, array.data_ptr)
        self.assertEqual(view.dtype, np.int32)
        np.testing.assert_array_equal(cupy.asnumpy(view), np.full((5, 2), 4, dtype=np.int32))
        view[0, 0] = -9
        cupy.cuda.get_current_stream().synchronize()
        self.assertEqual(host_values(array)[0, 0], -9)

    def test_stream_hand_off(self):
        spin = cupy.RawKernel(_SPIN_KERNEL, "spin")
        producer = cupy.cuda.Stream(non_blocking=True)
        consumer = cupy.cuda.Stream(non_blocking=True)
        values = mts.MtsArray.full((1, N), 3.0, device=CUDA0)
        values.synchronize()
        out = mts.MtsArray.zeros((1, N), device=CUDA0)
        out.synchronize()
        out.stream = producer.ptr
        with producer:
            spin((1,), (1,), (np.int64(200_000_000),))
        out.move_data(values, [(0, 0, 0, 0, N)])
        self.assertFalse(producer.done, "the producer stream finished before the hand-off")
        with consumer:
            view = cupy.from_dlpack(out)  # cupy passes consumer.ptr
            total = view.sum()
        consumer.synchronize()
        self.assertEqual(float(total), 3.0 * N)

    def test_cupy_to_mtsarray(self):
        values = cupy.arange(12, dtype=cupy.float64).reshape(3, 4)
        cupy.cuda.get_current_stream().synchronize()
        array = mts.MtsArray.from_dlpack(values)
        self.assertEqual(array.data_ptr, values.data.ptr)
        output = mts.MtsArray.zeros((3, 4), device=CUDA0)
        output.move_data(array, [(2, 0, 0, 0, 4), (0, 2, 1, 1, 3)])
        expected = np.zeros((3, 4))
        expected[0] = np.arange(8, 12)
        expected[2, 1:] = [1, 2, 3]
        np.testing.assert_array_equal(host_values(output), expected)


class Availability(unittest.TestCase):
    def test_report(self):
        reasons = [reason for reason in (TORCH_SKIP, CUPY_SKIP) if reason]
        if len(reasons) == 2:
            self.skipTest("; ".join(dict.fromkeys(reasons)))
        print(f"\nCUDA: {CUDA_AVAILABLE}, torch: {TORCH_SKIP or 'ready'}, cupy: {CUPY_SKIP or 'ready'}")


if __name__ == "__main__":
    sys.exit(support.run())
