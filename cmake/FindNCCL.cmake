# FindNCCL: NVIDIA's collective communication library.
#
#   find_package(NCCL [version])  ->  NCCL_FOUND, NCCL_VERSION, NCCL::NCCL
#
# Where it looks, in order:
#   - NCCL_ROOT (CMake or environment variable), NCCL_HOME and NCCL_DIR
#     (environment), the folder holding include/nccl.h and lib/;
#   - the `nvidia/nccl` folder of a Python's site-packages, where PyPI's
#     `nvidia-nccl-cu13` (and -cu12) wheel puts them: the Python named by
#     NCCL_PYTHON, else Python3_EXECUTABLE, else `python3` on PATH;
#   - the CUDA toolkit's folders and the system's (/usr/include, the
#     multiarch lib folder of Debian's libnccl-dev).
#
# The wheel ships lib/libnccl.so.2 only, without the libnccl.so link a
# development package adds: that name is searched too, and programs record
# the full path (the build's RUNPATH reaches it).
#
# For ROCm, RCCL is its own package (find_package(rccl) from ROCm's CMake
# files): it has the same API under the same names, in <rccl/rccl.h>.

set(_nccl_hints)
foreach(_nccl_root IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}" "$ENV{NCCL_HOME}" "$ENV{NCCL_DIR}")
    if(_nccl_root)
        list(APPEND _nccl_hints "${_nccl_root}")
    endif()
endforeach()

set(_nccl_python "${NCCL_PYTHON}")
if(NOT _nccl_python AND Python3_EXECUTABLE)
    set(_nccl_python "${Python3_EXECUTABLE}")
endif()
if(NOT _nccl_python)
    find_program(_nccl_python_on_path NAMES python3)
    set(_nccl_python "${_nccl_python_on_path}")
endif()
if(_nccl_python)
    # nvidia.nccl is a namespace package (no __init__.py): its __path__ says where
    execute_process(
        COMMAND "${_nccl_python}" -c "import nvidia.nccl as n; print(list(n.__path__)[0])"
        OUTPUT_VARIABLE _nccl_wheel RESULT_VARIABLE _nccl_wheel_status
        OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_nccl_wheel_status EQUAL 0 AND EXISTS "${_nccl_wheel}/include/nccl.h")
        list(APPEND _nccl_hints "${_nccl_wheel}")
    endif()
endif()
if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND _nccl_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
# The library beside the header first (a machine may hold several NCCLs: a
# wheel in a venv, one in the CUDA toolkit's folder), then anywhere
if(NCCL_INCLUDE_DIR)
    get_filename_component(_nccl_prefix "${NCCL_INCLUDE_DIR}" DIRECTORY)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
        PATHS "${_nccl_prefix}" PATH_SUFFIXES lib lib64 "lib/${CMAKE_LIBRARY_ARCHITECTURE}" NO_DEFAULT_PATH)
endif()
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
        REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    foreach(_nccl_part MAJOR MINOR PATCH)
        string(REGEX REPLACE ".*#define NCCL_${_nccl_part} +([0-9]+).*" "\\1" _nccl_${_nccl_part}
            "${_nccl_version_lines}")
    endforeach()
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
    REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
    VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
    # SHARED (not UNKNOWN): programs then get the library's folder in their
    # build RUNPATH, also for the wheel's libnccl.so.2
    add_library(NCCL::NCCL SHARED IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
        IMPORTED_LOCATION "${NCCL_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
