"""Builds and loads dlpack_exchange_consumer.c, the C consumer of the DLPack C
exchange API, with the C compiler and the headers of this Python and of
metatensor-core (DLPack 1.3). Returns None, with the reason, where there is
no C compiler."""

import ctypes
import os
import pathlib
import shutil
import subprocess
import sysconfig
import tempfile

SOURCE = pathlib.Path(__file__).with_name("dlpack_exchange_consumer.c")


def load():
    """(library, None), or (None, reason)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc) to build the exchange API consumer"
    import metatensor

    dlpack_include = pathlib.Path(metatensor.__file__).parent / "include" / "metatensor"
    folder = tempfile.mkdtemp(prefix="mtsarray-exchange-consumer-")
    library = os.path.join(folder, "dlpack_exchange_consumer.so")
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o", library, str(SOURCE),
         "-I", sysconfig.get_paths()["include"], "-I", str(dlpack_include)],
        check=True,
    )
    consumer = ctypes.PyDLL(library)
    consumer.consumer_describe.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_int64)]
    consumer.consumer_describe.restype = ctypes.c_int
    consumer.consumer_read.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_int64),
                                       ctypes.POINTER(ctypes.c_double)]
    consumer.consumer_read.restype = ctypes.c_int
    consumer.consumer_allocate.argtypes = [ctypes.py_object, ctypes.c_int64, ctypes.c_int32]
    consumer.consumer_allocate.restype = ctypes.py_object
    consumer.consumer_time.argtypes = [ctypes.py_object, ctypes.c_int64, ctypes.c_int32]
    consumer.consumer_time.restype = ctypes.c_double
    return consumer, None
