"""
The compiled core of mtsarray: arrays, DLPack and the metatensor bridge.

Import the ``mtsarray`` package rather than this module: it loads the
metatensor package's libmetatensor first, so that both share one copy.
"""

from collections.abc import Sequence
import enum

import numpy
import numpy.typing
from typing_extensions import CapsuleType


class Error(RuntimeError):
    """
    An operation of the mtsarray library failed; the message is the library's own (it names the function, the arrays and what was wrong).
    """

_library_version: str = '0.2.0'

class DLDeviceType(enum.IntEnum):
    """DLPack device types, as returned by ``MtsArray.__dlpack_device__``."""

    kDLCPU = 1

    kDLCUDA = 2

    kDLCUDAHost = 3

    kDLOpenCL = 4

    kDLVulkan = 7

    kDLMetal = 8

    kDLVPI = 9

    kDLROCM = 10

    kDLROCMHost = 11

    kDLExtDev = 12

    kDLCUDAManaged = 13

    kDLOneAPI = 14

    kDLWebGPU = 15

    kDLHexagon = 16

    kDLMAIA = 17

    kDLTrn = 18

class MtsArray:
    """
    An array made by mtsarray: a metatensor ``mts_array_t`` whose data lives on
    the CPU, a CUDA GPU or a ROCm GPU.

    Make one with :func:`zeros`, :func:`full` or :func:`from_dlpack`; read its
    data with any DLPack consumer (``numpy.from_dlpack``, ``torch.from_dlpack``,
    ``cupy.from_dlpack``, ``jax.dlpack.from_dlpack``), zero-copy on the same
    device. An MtsArray owns its array and releases it when it is garbage
    collected; DLPack exports keep the data alive after that. The values of a
    TensorBlock read through the metatensor package are views of arrays that
    metatensor owns (``is_view``): their data can be read and written, but not
    their shape or stream.

    All the work on an array (copies, move_data, swap_axes) is queued on its
    ``stream`` and never blocks the host on device memory.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions, a tuple of ints."""

    @property
    def ndim(self) -> int:
        """The number of dimensions."""

    @property
    def dtype(self) -> numpy.dtype | str:
        """
        The element type: a ``numpy.dtype``, or a name (``"bfloat16"``, ...) for DLPack types NumPy does not have.
        """

    @property
    def device(self) -> str:
        """
        Where the data lives: ``"cpu"``, ``"cuda:0"``, ``"rocm:1"``, ``"cuda_host"``, ...
        """

    @property
    def stream(self) -> int:
        """
        The DLPack number of the stream the array's work is queued on (CUDA: 1 legacy default, 2 per-thread default, >2 a ``cudaStream_t``; ROCm: 0 default, >2 a ``hipStream_t``; CPU arrays: -1).

        Setting it to a number, a stream object (``torch.cuda.Stream``, ``cupy.cuda.Stream``, ``__cuda_stream__``) or ``None`` (the default stream) makes later work go there, after the work already queued (the new stream waits on an event; the host does not block). Keep a stream given as a number alive as long as the array and its DLPack exports; a stream object is kept alive by the array, and the array's memory is released on the default stream once it is gone.
        """

    @stream.setter
    def stream(self, stream: int | object | None, /) -> None: ...

    @property
    def data_ptr(self) -> int:
        """
        The address of the first element, on the array's device (a device pointer for GPU arrays). Work may still be queued on it: synchronise before reading.
        """

    @property
    def is_view(self) -> bool:
        """
        True for a view of an array that metatensor owns (a TensorBlock's values): its shape and stream can not be changed.
        """

    def __len__(self) -> int:
        """The first dimension."""

    def __repr__(self) -> str: ...

    def __array__(self, dtype: numpy.typing.DTypeLike | None = None, copy: bool | None = None) -> numpy.ndarray:
        """
        The data as a NumPy array (``numpy.asarray(array)``): zero-copy for host memory, ``TypeError`` for GPU memory.
        """

    def copy(self, device: str | tuple[int, int] | tuple[str, int] | None = None) -> MtsArray:
        """
        A deep copy on ``device`` (default: the array's own), on that device's default stream. A copy to the host waits for the data; device copies do not block the host.
        """

    def move_data(self, input: MtsArray, movements: numpy.typing.ArrayLike) -> None:
        """
        Copy parts of ``input`` into this array (metatensor's ``move_data``).

        For every row ``(sample_in, sample_out, properties_start_in,
        properties_start_out, properties_length)`` of ``movements``::

            self[sample_out, ..., properties_start_out + x] =
                input[sample_in, ..., properties_start_in + x]   for x < properties_length

        Both arrays have the same dtype, device and component dimensions. The copy
        is queued on this array's stream, which first waits for the work queued on
        ``input``'s stream; the call does not wait for the device. Every movement is
        checked before anything is written: on error, this array is untouched.
        Two movements writing the same element: on a GPU one wins (unspecified),
        on the CPU the last one.

        :param input: the array to read (an MtsArray, not modified).
        :param movements: an ``(N, 5)`` array-like of non-negative integers. A
            C-contiguous NumPy array of int64 or uint64 is read in place, with no
            per-movement work in Python; anything else is converted once.
        :raises TypeError: ``movements`` are not integers.
        :raises ValueError: ``movements`` do not have the shape (N, 5), or hold a
            negative number.
        :raises mtsarray.Error: a movement out of range, another dtype, device or
            component shape.
        """

    def copy_from(self, source: object) -> None:
        """
        Copy every element of ``source`` into this array (``mtsarray_copy_into``).

        ``source`` has this array's dtype and shape, on any device mtsarray serves;
        the copy is queued on this array's stream after the work pending on both.
        Nothing is allocated on this array's device: a buffer made once (a batch
        on the GPU, a page-locked staging array) can be refilled every step. The
        call waits only when this array is in host memory (until the bytes are
        there).

        :param source: an MtsArray, or any object speaking DLPack (NumPy, PyTorch,
            CuPy, ...), read through a zero-copy import (a copy on its own device
            when it is not C-contiguous or is read-only).
        :raises TypeError: ``source`` does not speak DLPack.
        :raises mtsarray.Error: another dtype or shape, a device that can not be
            used; during a graph capture, a source that must be copied first
            (a replay would upload that copy, never what the source holds then).
        """

    def reshape(self, shape: int | Sequence[int]) -> None:
        """
        Change the shape in place (metatensor's ``reshape``): same number of elements, same data. One dimension may be -1, inferred.
        """

    def swap_axes(self, axis_1: int, axis_2: int) -> None:
        """
        Swap two axes in place (metatensor's ``swap_axes``): the data is transposed into new memory, queued on the array's stream. Negative axes count from the end.
        """

    def synchronize(self) -> None:
        """
        Block the calling thread (not other Python threads) until all the work queued on the array is done.
        """

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None, dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> CapsuleType:
        """
        Export the array as a DLPack capsule (array API standard 2024.12).

        :param stream: the consumer's stream, as a DLPack stream number for the
            consumer's device: CUDA ``1`` (legacy default), ``2`` (per-thread default)
            or a ``cudaStream_t`` handle; ROCm ``0`` or a ``hipStream_t`` handle;
            ``-1`` asks for no synchronisation; ``None`` is the device's default
            stream. The consumer's stream is made to wait for the work queued on
            the array (a device-side event: the host does not block). A host
            consumer of device data gets the data once the work is done.
        :param max_version: the highest DLPack version the consumer understands;
            ``None`` or a major version below 1 gives a pre-1.0 ``"dltensor"``
            capsule, otherwise a ``"dltensor_versioned"`` one (DLPack 1.x).
        :param dl_device: the device to export to, as ``(device_type, device_id)``;
            another device than the array's means a copy.
        :param copy: ``True`` always copies, ``False`` never (``BufferError`` if
            ``dl_device`` needs it), ``None`` copies only when needed.
        :raises BufferError: the export needs a copy and ``copy=False``, or a
            pre-1.0 capsule of read-only data was asked for.
        :raises mtsarray.Error: an invalid stream for the device, a device without
            a usable backend, ...
        """

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        """
        The array's device as DLPack ``(device_type, device_id)`` (array API standard 2024.12).
        """

    __dlpack_c_exchange_api__: PyCapsule = ...

class MovePlan:
    """
    A movement plan: the movements of :meth:`MtsArray.move_data` checked once,
    then executed every step with ``plan(output, input)``.

    ``MovePlan(output, input, movements)`` checks ``movements`` (read like
    move_data's; the plan keeps its own copy) for arrays shaped, typed and
    placed like ``output`` and ``input``. Calling the plan does what
    ``output.move_data(input, movements)`` does, without checking a movement
    again, on any arrays with the same dtype and device, the same dimensions
    after the first, and at least as many samples (first dimension) as the
    movements reach: one more than their highest ``sample_out`` for the output,
    ``sample_in`` for the input. On the CPU the plan also decides once how to
    copy (runs of consecutive movements, the split between threads).

    Streams are those of move_data: the copy is queued on the output's stream,
    after the input's pending work. A plan may be called from several threads
    at once, each with its own output.

    :raises TypeError: ``movements`` are not integers.
    :raises ValueError: ``movements`` do not have the shape (N, 5), or hold a
        negative number.
    :raises mtsarray.Error: a movement out of range, another dtype, device or
        component shape; when called: arrays the plan does not accept.
    """

    def __init__(self, output: MtsArray, input: MtsArray, movements: numpy.typing.ArrayLike) -> None: ...

    def __call__(self, output: MtsArray, input: MtsArray) -> None:
        """``output.move_data(input, movements)`` with the plan's movements."""

def set_num_threads(count: int) -> None:
    """
    Use up to ``count`` threads (the calling one included) for work on host memory (``mtsarray_set_num_threads``): copies, fills, move_data of 1 MiB and more. One thread behaves exactly like the serial code. Raises mtsarray.Error unless 1 <= count <= 4096.
    """

def get_num_threads() -> int:
    """
    The number of threads host-memory work may use: set by :func:`set_num_threads`, else ``MTSARRAY_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs this process may run on.
    """

def zeros(shape: int | Sequence[int], dtype: numpy.typing.DTypeLike = 'float64', device: str | tuple[int, int] | tuple[str, int] = 'cpu') -> MtsArray:
    """
    A new array of zeros.

    :param shape: the dimensions (an int or a sequence of ints).
    :param dtype: a NumPy dtype or its name (``"float32"``, ``numpy.int64``, ...)
        among bool, (u)int8 to (u)int64, float16 to float64, complex64,
        complex128; or ``"bfloat16"``.
    :param device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"rocm:0"``, ..., a
        ``(name, device_id)`` pair such as ``("cuda", 1)``, or a DLPack
        ``(device_type, device_id)`` pair.
    :return: an array whose memory is allocated and zeroed on the device's
        default stream (the call does not wait for a GPU).
    :raises mtsarray.Error: the device's backend is not usable here
        (:func:`backend_unavailable_reason` says why), out of memory.
    """

def full(shape: int | Sequence[int], value: bool | int | float | complex, dtype: numpy.typing.DTypeLike | None = None, device: str | tuple[int, int] | tuple[str, int] = 'cpu') -> MtsArray:
    """
    A new array filled with ``value``.

    :param shape: the dimensions (an int or a sequence of ints).
    :param value: a scalar the dtype can hold exactly (``2.5`` does not fit an
        int32 array, ``300`` does not fit int8: ``ValueError``); floating dtypes
        take it rounded to nearest, but a finite value that would round to
        infinity (``1e10`` in float16, ``3.4e38`` in bfloat16) is a
        ``ValueError`` too.
    :param dtype: as in :func:`zeros`; ``None`` takes NumPy's dtype of ``value``
        (bool, int64, float64 or complex128).
    :param device: as in :func:`zeros`.
    """

def from_dlpack(x: object, /, *, stream: int | object | None = None) -> MtsArray:
    """
    Make an MtsArray from any object speaking DLPack.

    NumPy, PyTorch, CuPy and JAX arrays, another MtsArray, or a DLPack capsule.
    The producer is asked for DLPack 1.x (``max_version``), falling back to the
    pre-1.0 protocol for older producers. The data is shared (zero-copy) when it
    is C-contiguous and writable; otherwise it is copied on the same device.

    :param x: the producer.
    :param stream: the stream the new array works on: a DLPack stream number
        or a stream object (``torch.cuda.Stream``, ``cupy.cuda.Stream``, anything
        with ``__cuda_stream__``, which the array then keeps alive). It is passed
        to the producer, which orders its pending work before it. ``None``: the
        device's default stream (CUDA legacy, ROCm default), the producer's
        default too. Host memory has no streams: for a producer on the CPU (or
        pinned memory) only ``None`` and ``-1`` are valid, checked before the
        producer is asked, which is asked without a stream.
    :raises TypeError: ``x`` does not speak DLPack, its ``__dlpack_device__()``
        is not a pair of integers, or a stream object is given for a producer
        without ``__dlpack_device__``.
    :raises ValueError: the device type or id of ``__dlpack_device__()`` is out
        of DLPack's range (a device id is an int32).
    :raises mtsarray.Error: mtsarray can not hold the data (dtype, device), a
        stream that is not one of the producer's device.
    """

def backend_available(device_type: str | int) -> bool:
    """
    Whether arrays can be made on ``device_type`` (``"cpu"``, ``"cuda"``, ``"rocm"``, a device such as ``"cuda:1"``, or a DLPack device type): its backend was compiled in and a driver and a device are present. The CPU always is.
    """

def device_count(device_type: str | int) -> int:
    """
    The number of devices arrays of ``device_type`` can be made on: their ids are 0 to the count - 1 (``"cuda:0"``, ``("cuda", 1)``, ...). ``device_type`` is a name (``"cpu"``, ``"cuda"``, ``"rocm"``, ...; a device such as ``"cuda:1"`` names its type) or a DLPack device type. 1 for the CPU; for a GPU type, the devices its runtime reports (after ``CUDA_VISIBLE_DEVICES`` or ``HIP_VISIBLE_DEVICES``), counted once per process, and 0 when its backend was not compiled in or has no driver or device (:func:`backend_unavailable_reason` says why). Makes no context on any device.

    :raises ValueError: ``device_type`` is a name mtsarray does not know.
    :raises mtsarray.Error: ``device_type`` is a DLPack device type that no backend of mtsarray serves (OpenCL, Vulkan, ...).
    """

def backend_unavailable_reason(device_type: str | int) -> str:
    """
    Why ``device_type`` can not be used here (not compiled in, no driver, no device), or ``""`` when :func:`backend_available` is true.
    """

def empty_cache(device: str | tuple[int, int] | tuple[str, int]) -> None:
    """
    Give the memory mtsarray keeps cached for reuse on ``device`` (``"cuda:0"``, ...) back to the device, for the other libraries of the process: what ``torch.cuda.empty_cache()`` does for PyTorch's (``mtsarray_release_cached_memory``). Memory in use stays. A no-op for the CPU.
    """

def set_release_threshold(device: str | tuple[int, int] | tuple[str, int], bytes: int) -> None:
    """
    How much freed memory mtsarray keeps cached on ``device`` across synchronisations; beyond it, cached memory goes back at the next synchronisation. Default: 1/16 of the device (``mtsarray_set_release_threshold``). A no-op for the CPU.
    """

def get_release_threshold(device: str | tuple[int, int] | tuple[str, int]) -> int:
    """
    The release threshold of ``device`` in bytes (see :func:`set_release_threshold`); 0 for the CPU.
    """

def _tensormap_to(address: int, device: object, stream: object | None = None) -> int:
    """
    mtsarray_tensormap_to on the mts_tensormap_t at ``address``: the address of the new one.
    """

def _borrow(address: int, owner: object) -> MtsArray:
    """
    A view of the mts_array_t struct at ``address``, keeping ``owner`` alive.
    """

def _from_dlpack_into(x: object | None, address: int, stream: object | None = None) -> None:
    """
    from_dlpack(x, stream=stream) written to the mts_array_t struct at ``address``, which owns it from then on (for mts_block and mts_labels, which take ownership).
    """

def _time_move_data(output: MtsArray, input: MtsArray, movements: object, iterations: int) -> float:
    """
    Seconds per call of the C move_data callback, called ``iterations`` times from C++ with the movements read as MtsArray.move_data reads them (bench/python_overhead.py).
    """
