"""mtsarray: metatensor arrays on the CPU, CUDA GPUs and ROCm GPUs.

Arrays made here (:class:`MtsArray`) are metatensor ``mts_array_t``: the
metatensor package operates on them (:func:`tensormap_to` moves a whole
``metatensor.TensorMap`` to a device), and every framework reads them through
DLPack, zero-copy on the same device::

    import mtsarray, torch

    features = mtsarray.from_dlpack(torch_features)       # zero-copy
    batch = mtsarray.zeros((n_atoms, n_features), dtype="float32", device="cuda")
    batch.stream = torch.cuda.current_stream()
    batch.move_data(features, movements)                  # (N, 5) int64 array
    model(torch.from_dlpack(batch))                       # zero-copy, stream-ordered

All work on an array is queued on its ``stream`` and never blocks the host on
device memory; ``__dlpack__(stream=...)`` makes the consumer's stream wait
for it on the device.
"""

import metatensor


def _load_libmetatensor():
    # libmtsarray and this package's extension link libmetatensor: load the
    # metatensor package's copy first, the way metatensor finds it, so that
    # the extension binds to that very library (one registry of data
    # origins, one last-error slot). Without this, the extension's RUNPATH
    # finds the same file in the metatensor-core wheel.
    try:
        from metatensor._c_lib import _get_library
    except ImportError:  # pragma: no cover (another metatensor layout)
        return
    _get_library()


_load_libmetatensor()

from ._mtsarray import (  # noqa: E402
    DLDeviceType,
    Error,
    MovePlan,
    MtsArray,
    _library_version,
    backend_available,
    backend_unavailable_reason,
    device_count,
    empty_cache,
    from_dlpack,
    full,
    get_num_threads,
    get_release_threshold,
    set_num_threads,
    set_release_threshold,
    zeros,
)
from ._metatensor import tensormap_to  # noqa: E402  (registers the array wrapper)
from ._bridges import tensormap_as, to_metatensor_torch  # noqa: E402

__version__: str = _library_version

# errors and reprs say mtsarray.MtsArray, not mtsarray._mtsarray.MtsArray
for _name in ("DLDeviceType", "Error", "MovePlan", "MtsArray"):
    globals()[_name].__module__ = __name__
del _name


__all__ = [
    "DLDeviceType",
    "Error",
    "MovePlan",
    "MtsArray",
    "__version__",
    "backend_available",
    "backend_unavailable_reason",
    "device_count",
    "empty_cache",
    "from_dlpack",
    "full",
    "get_num_threads",
    "get_release_threshold",
    "set_num_threads",
    "set_release_threshold",
    "tensormap_as",
    "tensormap_to",
    "to_metatensor_torch",
    "zeros",
]

del metatensor
