"""Running a test file of tests/python as a ctest test.

Exit codes: 0 passed, 1 failed, 77 skipped (ctest SKIP_RETURN_CODE): a module
the file needs is missing, or every test in it skipped (no GPU, ...). With
MTSARRAY_PYTHON_TESTS_REQUIRED=1 (CI) a missing module is a failure instead.
"""

import importlib
import os
import sys
import unittest

SKIPPED = 77

# the tests import mtsarray_ctypes from this folder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def require(*modules):
    """Import `modules` or stop the test file with a printed reason."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as error:
            if os.environ.get("MTSARRAY_PYTHON_TESTS_REQUIRED") == "1":
                print(f"FAILED: '{name}' is required (MTSARRAY_PYTHON_TESTS_REQUIRED=1): {error}")
                sys.exit(1)
            print(f"SKIPPED: the Python module '{name}' is not available ({error})")
            sys.exit(SKIPPED)


def run():
    """Run the unittest cases of __main__; returns the process exit code."""
    program = unittest.main(module="__main__", exit=False, verbosity=2)
    result = program.result
    if not result.wasSuccessful():
        return 1
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        for _, reason in result.skipped[:1]:
            print(f"SKIPPED: every test skipped ({reason})")
        return SKIPPED
    return 0
