"""Zero-copy bridges between TensorMaps of mtsarray arrays and TensorMaps of
NumPy arrays or PyTorch tensors: metatensor-operations, metatensor-learn and
metatensor-torch models work on NumPy and PyTorch arrays only.

Values and gradients cross through DLPack and share their memory; Labels
are metadata and are made anew (small, read-only).
"""

import ctypes
import sys
from typing import Any

import metatensor
import numpy as np
from metatensor import Labels, TensorBlock, TensorMap
from metatensor._c_api import c_uintptr_t, mts_array_t, mts_labels_t
from metatensor._c_lib import _get_library
from metatensor._data import data_origin, data_origin_name

from ._mtsarray import DLDeviceType, MtsArray, _borrow, _from_dlpack_into

_ARRAYS = ("numpy", "torch", "mtsarray")
# the memory NumPy reads (MtsArray.device names): what the host computes on
_HOST_MEMORY = ("cpu", "cuda_host", "cuda_managed", "rocm_host")


def tensormap_as(tensor: Any, arrays: str, stream: Any = None) -> metatensor.TensorMap:
    """The same TensorMap with other arrays, sharing the values' memory.

    ``arrays="numpy"`` or ``"torch"``: ``tensor`` is a TensorMap of mtsarray
    arrays (from :func:`tensormap_to`, or from ``arrays="mtsarray"``); the
    result has the same keys, blocks, labels, gradients and info, and each
    value and gradient array is a ``numpy.ndarray`` or a ``torch.Tensor``
    viewing the mtsarray memory through DLPack, on the same device. A torch
    tensor of GPU memory is ordered on PyTorch's current stream: that stream
    waits for the work queued on the mtsarray array (an event, the host does
    not block). NumPy reads host memory only (``"cpu"``, pinned or managed
    memory): move a GPU map with :func:`tensormap_to` first. The memory
    lives as long as any view, whatever happens to ``tensor``.

    ``arrays="mtsarray"``: ``tensor`` is a TensorMap of NumPy arrays or torch
    tensors (a ``metatensor.TensorMap``, or a ``metatensor.torch.TensorMap``);
    every value and gradient array becomes an mtsarray array through
    :func:`from_dlpack`: zero-copy when its data is C-contiguous and writable,
    copied on its own device otherwise (a transposed or sliced array, a
    read-only NumPy array). Torch tensors that require grad are refused:
    ``detach()`` them first (``metatensor.detach``). The Labels are copied
    into mtsarray arrays on the values' device, so that :func:`tensormap_to`
    and the metatensor package work on the result as on any mtsarray map.

    Nothing is converted when anything can not be: ``tensor`` is never
    changed, and the result is made whole or not at all.

    :param tensor: the TensorMap to bridge.
    :param arrays: ``"numpy"``, ``"torch"`` or ``"mtsarray"``.
    :param stream: ``arrays="mtsarray"`` only: the stream the new arrays
        work on, as in :func:`from_dlpack` (the producers order their pending
        work before it); ``None`` is the device's default stream. A stream
        object must stay alive as long as the returned TensorMap.
    :return: a new ``metatensor.TensorMap``.
    :raises TypeError: ``tensor`` is not a TensorMap, or holds arrays of
        another kind than ``arrays`` converts from.
    :raises ValueError: an unknown ``arrays``, a GPU map for NumPy, a
        ``stream`` for NumPy or PyTorch arrays, tensors requiring grad,
        NumPy values that DLPack can not carry (not in the machine's byte
        order, or ``longdouble`` wider than a double).
    :raises ModuleNotFoundError: ``arrays="torch"`` without PyTorch.
    """
    if arrays not in _ARRAYS:
        raise ValueError(f"tensormap_as: arrays must be one of {', '.join(map(repr, _ARRAYS))}, got {arrays!r}")
    if arrays == "mtsarray":
        return _from_arrays(tensor, stream)
    if stream is not None:
        raise ValueError(f"tensormap_as: stream is for arrays='mtsarray'; {arrays} arrays are read on their "
                         "framework's stream (PyTorch's current stream)")
    if not isinstance(tensor, TensorMap):
        raise TypeError(f"tensormap_as: expected a metatensor.TensorMap, got {type(tensor).__name__}")
    arrays_of = _views_of(tensor)
    if arrays == "numpy":
        for where, view in arrays_of:
            if view.device.split(":")[0] not in _HOST_MEMORY:
                raise ValueError(f"tensormap_as: {where} are on {view.device}, and NumPy reads host memory only: "
                                 "move the TensorMap with mtsarray.tensormap_to(tensor, 'cpu') first")
        return _rebuild(tensor, np.from_dlpack, lambda names, values: Labels(names, values, assume_unique=True),
                        TensorMap, TensorBlock)
    torch = _import_torch("tensormap_as(arrays='torch')")
    device = _torch_device(tensor)

    def torch_labels(names, values):
        return Labels(names, torch.from_numpy(values).to(device), assume_unique=True)

    return _rebuild(tensor, torch.from_dlpack, torch_labels, TensorMap, TensorBlock)


def to_metatensor_torch(tensor: metatensor.TensorMap) -> Any:
    """A ``metatensor.torch.TensorMap`` sharing the values of ``tensor``, a
    TensorMap of mtsarray arrays: what a metatensor-torch model takes.

    Values and gradients are torch tensors viewing the mtsarray memory on the
    same device (through DLPack, ordered on PyTorch's current stream, as in
    :func:`tensormap_as`); Labels are copied into metatensor-torch Labels on
    that device. :func:`tensormap_as` with ``arrays="mtsarray"`` takes a
    ``metatensor.torch.TensorMap`` back without a copy.

    :raises TypeError: ``tensor`` is not a TensorMap of mtsarray arrays.
    :raises ModuleNotFoundError: metatensor-torch (or PyTorch) is not installed.
    """
    torch = _import_torch("to_metatensor_torch")
    try:
        import metatensor.torch as metatensor_torch
    except ImportError as error:
        raise ModuleNotFoundError(f"to_metatensor_torch needs metatensor-torch, which is not importable: {error}") \
            from error
    if not isinstance(tensor, TensorMap):
        raise TypeError(f"to_metatensor_torch: expected a metatensor.TensorMap, got {type(tensor).__name__}")
    _views_of(tensor)
    device = _torch_device(tensor)

    def torch_labels(names, values):
        return metatensor_torch.Labels(names, torch.from_numpy(values)).to(device)

    return _rebuild(tensor, torch.from_dlpack, torch_labels, metatensor_torch.TensorMap,
                    metatensor_torch.TensorBlock)


# ---- mtsarray -> NumPy / PyTorch ------------------------------------------------

def _blocks_of(tensor):
    """(where, block) for every block and every gradient block, `where`
    saying which it is in errors."""
    for index, block in enumerate(tensor.blocks()):
        yield f"the values of block {index}", block
        for parameter in block.gradients_list():
            yield f"the '{parameter}' gradients of block {index}", block.gradient(parameter)


def _views_of(tensor):
    """The values of every block and gradient, checked to be mtsarray arrays."""
    views = []
    for where, block in _blocks_of(tensor):
        values = block.values
        if not isinstance(values, MtsArray):
            raise TypeError(f"{where} are {type(values).__module__}.{type(values).__name__}, not mtsarray arrays: "
                            "tensormap_as converts TensorMaps made by mtsarray (tensormap_to, "
                            "tensormap_as(arrays='mtsarray')); use TensorMap.to(arrays=...) for others")
        views.append((where, values))
    return views


def _host_labels_values(labels):
    """A copy of the values of `labels` (metatensor-core's) read from the
    host copy libmetatensor keeps: no wait for the device they are on."""
    values = ctypes.POINTER(ctypes.c_int32)()
    count, size = c_uintptr_t(), c_uintptr_t()
    _get_library().mts_labels_values_cpu(labels.as_mts_labels_t(), values, count, size)
    if count.value * size.value == 0:
        return np.zeros((count.value, size.value), dtype=np.int32)
    return np.ctypeslib.as_array(values, shape=(count.value, size.value)).copy()


def _torch_device(tensor):
    """The torch device of a map of mtsarray arrays: that of its keys, which
    libmetatensor keeps on the values' device."""
    raw = tensor.keys._raw_values
    if data_origin_name(data_origin(raw)) != "mtsarray":
        return "cpu"
    device_type, device_id = _borrow(ctypes.addressof(raw), tensor.keys).__dlpack_device__()
    # PyTorch calls ROCm devices "cuda" too; host memory is its CPU
    return f"cuda:{device_id}" if device_type in (DLDeviceType.kDLCUDA, DLDeviceType.kDLROCM) else "cpu"


def _rebuild(tensor, convert, make_labels, tensor_map, tensor_block):
    """`tensor` made anew with `tensor_map` and `tensor_block` (metatensor's
    or metatensor-torch's), each value array `convert(view)`, each Labels
    `make_labels(names, host values)`.

    Every Labels is made before any value array is converted: a torch Labels
    on a GPU is read back to the host on PyTorch's stream, which must not
    wait yet for the map's pending work (the host would)."""
    def labels_of(block):
        return (make_labels(block.samples.names, _host_labels_values(block.samples)),
                [make_labels(c.names, _host_labels_values(c)) for c in block.components],
                make_labels(block.properties.names, _host_labels_values(block.properties)))

    keys = make_labels(tensor.keys.names, _host_labels_values(tensor.keys))
    layout = []  # (block, its labels, [(parameter, gradient, its labels)])
    for block in tensor.blocks():
        gradients = [(parameter, block.gradient(parameter)) for parameter in block.gradients_list()]
        layout.append((block, labels_of(block), [(p, g, labels_of(g)) for p, g in gradients]))

    blocks = []
    for block, labels, gradients in layout:
        result = tensor_block(convert(block.values), *labels)
        for parameter, gradient, gradient_labels in gradients:
            result.add_gradient(parameter, tensor_block(convert(gradient.values), *gradient_labels))
        blocks.append(result)
    result = tensor_map(keys, blocks)
    for key, value in tensor.info().items():
        result.set_info(key, value)
    return result


# ---- NumPy / PyTorch -> mtsarray ------------------------------------------------

def _from_arrays(tensor, stream):
    """tensormap_as(tensor, "mtsarray", stream)."""
    if not isinstance(tensor, TensorMap) and not _is_metatensor_torch_tensor_map(tensor):
        raise TypeError("tensormap_as: expected a metatensor.TensorMap or a metatensor.torch.TensorMap, got "
                        f"{type(tensor).__name__}")
    # everything checked before any array is made
    for where, block in _blocks_of(tensor):
        values = block.values
        if isinstance(values, MtsArray):
            continue
        if not hasattr(values, "__dlpack__"):
            raise TypeError(f"{where} are {type(values).__name__}, which does not speak DLPack")
        if getattr(values, "requires_grad", False):
            raise ValueError(f"{where} require grad, which mtsarray arrays do not record: detach them first "
                             "(tensor.detach(), metatensor.detach)")
        if isinstance(values, np.ndarray):
            why = _why_numpy_can_not_export(values.dtype)
            if why is not None:
                raise ValueError(f"{where} are {values.dtype.str} ({why}), which NumPy can not export through "
                                 "DLPack: convert them first (values.astype(values.dtype.newbyteorder('=')), or "
                                 "to float64)")

    lib = _get_library()

    def new_labels(labels):
        values = mts_array_t()
        _from_dlpack_into(labels.values, ctypes.addressof(values), stream)
        # the Labels own the array from here, even on error
        return Labels(list(labels.names), values, assume_unique=True)

    def new_block(block):
        samples = new_labels(block.samples)
        components = [new_labels(component) for component in block.components]
        properties = new_labels(block.properties)
        components_array = (ctypes.POINTER(mts_labels_t) * len(components))(
            *[component.as_mts_labels_t() for component in components])
        values = mts_array_t()
        _from_dlpack_into(block.values, ctypes.addressof(values), stream)
        # mts_block owns the array from here, even on error
        pointer = lib.mts_block(values, samples.as_mts_labels_t(), components_array, len(components),
                                properties.as_mts_labels_t())
        return TensorBlock.unsafe_from_ptr(pointer)

    blocks = []
    for block in tensor.blocks():
        result = new_block(block)
        for parameter in block.gradients_list():
            result.add_gradient(parameter, new_block(block.gradient(parameter)))
        blocks.append(result)
    result = TensorMap(new_labels(tensor.keys), blocks)
    for key, value in tensor.info().items():
        result.set_info(key, value)
    return result


def _why_numpy_can_not_export(dtype):
    """Why NumPy's __dlpack__ refuses arrays of `dtype`, or None: DLPack
    holds values in the machine's byte order, and no extended precision
    float (x86's 80-bit long double, padded to 16 bytes)."""
    if not dtype.isnative:
        return "not in the machine's byte order"
    if dtype.type in (np.longdouble, np.clongdouble) and \
            dtype.itemsize > np.dtype(np.complex128 if dtype.kind == "c" else np.float64).itemsize:
        return "an extended precision long double"
    return None


def _is_metatensor_torch_tensor_map(tensor):
    """Whether `tensor` is a metatensor.torch.TensorMap (a TorchScript class:
    a torch.ScriptObject of that class)."""
    torch = sys.modules.get("torch")  # imported wherever such a map exists
    if torch is None or not isinstance(tensor, torch.ScriptObject):
        return False
    return tensor._type().qualified_name() == "__torch__.torch.classes.metatensor.TensorMap"


def _import_torch(what):
    try:
        import torch
    except ImportError as error:
        raise ModuleNotFoundError(f"{what} needs PyTorch, which is not importable: {error}") from error
    return torch


__all__ = ["tensormap_as", "to_metatensor_torch"]
