"""What the mtsarray package's tests share: required and optional imports.

Optional modules (torch, cupy, jax) and devices make tests skip with the
reason, but those named in MTSARRAY_PYTHON_TESTS_REQUIRE, which fail. The package's own requirements (mtsarray, numpy, metatensor) skip
too on a developer's machine, but fail when MTSARRAY_PYTHON_TESTS_REQUIRED=1
(scripts/test.sh sets it under CI), so that CI never passes by skipping.
"""

import importlib
import os

import pytest


def require(name):
    """Import a module the tests can not do without."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if os.environ.get("MTSARRAY_PYTHON_TESTS_REQUIRED") == "1":
            pytest.fail(f"'{name}' is required (MTSARRAY_PYTHON_TESTS_REQUIRED=1): {error}", pytrace=False)
        pytest.skip(f"the Python module '{name}' is not available ({error})", allow_module_level=True)


def optional(name):
    """Import an optional module, or None; a module named in
    MTSARRAY_PYTHON_TESTS_REQUIRE (comma-separated: scripts/test.sh names
    torch and metatensor.torch, which CI installs) is required instead, so
    that its cases can not skip there unnoticed."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if name in os.environ.get("MTSARRAY_PYTHON_TESTS_REQUIRE", "").split(","):
            pytest.fail(f"'{name}' is required (MTSARRAY_PYTHON_TESTS_REQUIRE): {error}", pytrace=False)
        return None


def loaded_libraries(name):
    """Distinct files mapped into this process that are the library `name`
    ("libmetatensor": libmetatensor.so*, not libmetatensor_torch.so)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps}
    return sorted(path for path in paths if os.path.basename(path).startswith(name + "."))
