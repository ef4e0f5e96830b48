"""The metatensor package and mtsarray arrays.

On import, mtsarray registers how the metatensor package reads arrays whose
data origin is "mtsarray": a TensorBlock's values (and gradients) become
:class:`~mtsarray.MtsArray` views, Labels values NumPy arrays (host copies for
labels on a GPU; Labels are read on the host by metatensor anyway).
"""

import ctypes
from typing import Any, Optional, Union

import metatensor
import numpy as np

from ._mtsarray import MtsArray, _borrow, _tensormap_to

DeviceLike = Union[str, "tuple[int, int]", "tuple[str, int]"]
StreamLike = Union[int, Any, None]

_HOST = (1, 0)  # DLPack (kDLCPU, 0)


def tensormap_to(
    tensor: metatensor.TensorMap, device: DeviceLike, stream: StreamLike = None
) -> metatensor.TensorMap:
    """Copy a whole TensorMap to ``device``, without PyTorch.

    Every block's values and gradients become mtsarray arrays on ``device``
    working on ``stream``, and the keys and every block's labels are copied
    there too (libmetatensor needs them on the values' device). Arrays of
    any origin (NumPy, PyTorch, mtsarray, ...) are read through DLPack;
    ``tensor`` is left untouched. The copies are queued on ``stream``; the
    call does not wait for a GPU destination.

    The metatensor package operates on the result (``keys_to_properties``,
    ``keys_to_samples``, ``components_to_properties``, ``copy``, save, block
    selection, ...) through the arrays' callbacks, on the device; a block's
    ``values`` are :class:`~mtsarray.MtsArray` views that any DLPack consumer
    reads.

    :param tensor: the TensorMap to copy.
    :param device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"rocm:0"``, ..., a
        ``(name, device_id)`` pair such as ``("cuda", 1)``, or a DLPack
        ``(device_type, device_id)`` pair.
    :param stream: the stream the new arrays work on, as a DLPack stream
        number for ``device`` or a stream object (``torch.cuda.Stream``,
        ``cupy.cuda.Stream``); ``None`` is the device's default stream. It
        must stay alive as long as the returned TensorMap (the arrays keep
        working on it).
    :return: a new ``metatensor.TensorMap``.
    :raises mtsarray.Error: the device's backend is not usable, a dtype
        mtsarray does not store, ...
    """
    if not isinstance(tensor, metatensor.TensorMap):
        raise TypeError(f"tensormap_to: expected a metatensor.TensorMap, got {type(tensor).__name__}")
    pointer = tensor.as_mts_tensormap_t()
    address = _tensormap_to(ctypes.cast(pointer, ctypes.c_void_p).value or 0, device, stream)
    return metatensor.TensorMap.unsafe_from_ptr(ctypes.cast(address, type(pointer)))


def _read_mtsarray_array(mts_array: Any, parent: Any) -> Any:
    """metatensor's wrapper for the "mtsarray" data origin: ``mts_array`` is
    the ctypes ``mts_array_t`` metatensor got from a block or labels,
    ``parent`` the Python object that owns it."""
    view = _borrow(ctypes.addressof(mts_array), parent)
    if isinstance(parent, metatensor.Labels):
        # metatensor indexes, iterates and compares Labels values with NumPy
        values = np.from_dlpack(view, device="cpu") if view.device != "cpu" else np.from_dlpack(view)
        values.flags.writeable = False
        return values
    return view


metatensor.register_external_data_wrapper("mtsarray", _read_mtsarray_array)

__all__ = ["tensormap_to", "MtsArray"]
