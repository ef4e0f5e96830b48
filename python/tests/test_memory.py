"""mtsarray's cached device memory, beside other libraries on one GPU.

mtsarray keeps freed device memory cached for reuse up to a release
threshold across synchronisations; ``empty_cache`` gives it all back (as
``torch.cuda.empty_cache()`` does for PyTorch's). The host has no cache.
The GPU cases run where mtsarray has a usable CUDA backend.
"""

import pytest
from conftest import optional, require

mtsarray = require("mtsarray")
torch = optional("torch")

CUDA_AVAILABLE = mtsarray.backend_available("cuda")
needs_cuda = pytest.mark.skipif(
    not CUDA_AVAILABLE, reason=f"the mtsarray CUDA backend is not usable: {mtsarray.backend_unavailable_reason('cuda')}"
)


def test_the_host_has_no_cache():
    mtsarray.empty_cache("cpu")
    mtsarray.set_release_threshold("cpu", 1 << 20)
    assert mtsarray.get_release_threshold("cpu") == 0


def test_a_negative_threshold_is_refused():
    with pytest.raises(ValueError, match="number of bytes"):
        mtsarray.set_release_threshold("cpu", -1)


def test_an_unknown_device_is_refused():
    with pytest.raises((ValueError, mtsarray.Error)):
        mtsarray.empty_cache("nowhere")


@needs_cuda
def test_the_release_threshold_is_settable_and_the_cache_emptied():
    default = mtsarray.get_release_threshold("cuda:0")
    assert default > 0
    if torch is not None and torch.cuda.is_available():  # the device's size, as cudaMemGetInfo gives it
        assert default == torch.cuda.mem_get_info(0)[1] // 16, "the default is 1/16 of the device"
    try:
        mtsarray.set_release_threshold("cuda:0", 1 << 30)
        assert mtsarray.get_release_threshold("cuda:0") == 1 << 30
        array = mtsarray.zeros((1 << 20,), device="cuda:0")
        del array
        mtsarray.empty_cache("cuda:0")
        mtsarray.empty_cache((2, 0))  # the DLPack (kDLCUDA, 0) form
    finally:
        mtsarray.set_release_threshold("cuda:0", default)
    assert mtsarray.get_release_threshold("cuda:0") == default
