"""The package itself: how it finds its libraries, its version, type hints
and docstrings on every public name, and threads."""

import ast
import importlib.metadata
import inspect
import os
import pathlib
import re
import subprocess
import sys
import threading

import pytest
from conftest import loaded_libraries, require

np = require("numpy")
mtsarray = require("mtsarray")

PACKAGE = pathlib.Path(mtsarray.__file__).parent


REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


def test_version():
    # one number: the package's metadata and __version__ are the library's
    # mtsarray_version() (test_libmtsarray_finds_libmetatensor_by_itself
    # reads it from the packaged libmtsarray.so too)
    assert mtsarray.__version__ == importlib.metadata.version("mtsarray")
    assert mtsarray.__version__ == mtsarray._mtsarray._library_version
    assert mtsarray.__version__.count(".") == 2


@pytest.mark.skipif(not (REPOSITORY / "CMakeLists.txt").is_file(), reason="not in the repository (an sdist?)")
def test_version_is_the_one_of_cmake_project():
    # CMake's project() is where the number is written; the C library and the
    # package metadata (python/pyproject.toml reads it) follow, and so does
    # the documentation (scripts/check_docs_site.py checks the built site)
    text = (REPOSITORY / "CMakeLists.txt").read_text()
    match = re.search(r"project\(mtsarray\s+VERSION\s+([0-9.]+)", text)
    assert match is not None
    assert mtsarray.__version__ == match.group(1)


def test_libraries_are_found_without_ld_library_path():
    environment = {key: value for key, value in os.environ.items() if key != "LD_LIBRARY_PATH"}
    script = (
        "import mtsarray, numpy\n"
        "a = mtsarray.full((2, 2), 1.5)\n"
        "assert numpy.from_dlpack(a).sum() == 6.0\n"
        "maps = [line.split()[-1] for line in open('/proc/self/maps') if 'libmetatensor' in line]\n"
        "assert len(set(maps)) == 1, set(maps)\n"
    )
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, cwd="/")


def test_libmtsarray_finds_libmetatensor_by_itself():
    # without the metatensor package loaded first: the RUNPATH finds the wheel's copy
    library = PACKAGE / "lib" / "libmtsarray.so"
    assert library.is_file()
    script = (
        "import ctypes, sys\n"
        f"lib = ctypes.CDLL({str(library)!r})\n"
        "lib.mtsarray_version.restype = ctypes.c_char_p\n"
        "print(lib.mtsarray_version().decode())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd="/")
    assert result.stdout.strip() == mtsarray.__version__


def test_one_copy_of_each_library():
    assert len(loaded_libraries("libmetatensor")) == 1
    assert len(loaded_libraries("libmtsarray")) == 1


PUBLIC = [name for name in mtsarray.__all__ if name != "__version__"]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_names_have_docstrings(name):
    value = getattr(mtsarray, name)
    assert inspect.getdoc(value), f"mtsarray.{name} has no docstring"


def test_methods_and_properties_have_docstrings():
    for name, member in vars(mtsarray.MtsArray).items():
        if name.startswith("_") and name not in ("__dlpack__", "__dlpack_device__", "__array__", "__len__"):
            continue
        assert inspect.getdoc(member), f"MtsArray.{name} has no docstring"


def _stub():
    path = PACKAGE / "_mtsarray.pyi"
    assert path.is_file(), "the type stub of the extension is missing"
    assert (PACKAGE / "py.typed").is_file()
    return ast.parse(path.read_text())


def _check_annotated(function, where):
    arguments = function.args
    for argument in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
        if argument.arg == "self":
            continue
        assert argument.annotation is not None, f"{where}: '{argument.arg}' has no type hint"
    assert function.returns is not None, f"{where} has no return type"


def test_type_hints_on_every_public_name():
    stub = _stub()
    functions = {node.name: node for node in stub.body if isinstance(node, ast.FunctionDef)}
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    for name in PUBLIC:
        if name in functions:
            _check_annotated(functions[name], f"mtsarray.{name}")
        elif name in classes:
            for node in classes[name].body:
                if isinstance(node, ast.FunctionDef):
                    _check_annotated(node, f"mtsarray.{name}.{node.name}")
        else:
            # written in Python: its signature carries the hints
            signature = inspect.signature(getattr(mtsarray, name))
            for parameter in signature.parameters.values():
                assert parameter.annotation is not inspect.Parameter.empty, f"mtsarray.{name}: {parameter.name}"
            assert signature.return_annotation is not inspect.Signature.empty
    methods = {node.name for node in classes["MtsArray"].body if isinstance(node, ast.FunctionDef)}
    for expected in ["shape", "dtype", "device", "stream", "copy", "move_data", "swap_axes", "reshape",
                     "synchronize", "__dlpack__", "__dlpack_device__", "__repr__"]:
        assert expected in methods, expected


def test_the_array_api_signature_of_dlpack():
    stub = _stub()
    array = next(node for node in stub.body if isinstance(node, ast.ClassDef) and node.name == "MtsArray")
    dlpack = next(node for node in array.body if isinstance(node, ast.FunctionDef) and node.name == "__dlpack__")
    assert [a.arg for a in dlpack.args.kwonlyargs] == ["stream", "max_version", "dl_device", "copy"]
    assert [a.arg for a in dlpack.args.args] == ["self"]


def test_threads_share_arrays_without_crashing():
    # move_data and exports release the GIL; metadata changes meanwhile raise
    source = mtsarray.from_dlpack(np.arange(200_000.0).reshape(1000, 200))
    movements = np.array([[i, 999 - i, 0, 0, 200] for i in range(1000)], dtype=np.int64)
    errors = []
    refused = []

    def work():
        try:
            for _ in range(20):
                output = mtsarray.zeros((1000, 200))
                output.move_data(source, movements)
                view = np.from_dlpack(output)
                assert view[0, 0] == 999 * 200.0
        except Exception as error:  # pragma: no cover (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        try:
            source.reshape((1000, 200))
        except RuntimeError as error:
            refused.append(str(error))
    for thread in threads:
        thread.join()
    assert errors == []
    assert all("another thread" in message for message in refused)
    np.testing.assert_array_equal(np.asarray(source), np.arange(200_000.0).reshape(1000, 200))
