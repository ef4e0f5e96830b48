# The NCCL programs (examples/nccl_tensormap.c, bench/nccl_allreduce_bench.c):
# MPI programs (cmake/mpi-programs.cmake, included first) that also link NCCL
# and the CUDA runtime. Included by examples/CMakeLists.txt (in the mtsarray
# build and standalone) and bench/CMakeLists.txt.
#
#   MTSARRAY_NCCL  default: ON when the CUDA backend is built (standalone: the
#                  installed mtsarray has it), CMake finds the CUDA toolkit,
#                  MPI and NCCL (cmake/FindNCCL.cmake: NCCL_ROOT, or the
#                  nvidia-nccl-cu13 wheel of a Python). Off: the programs are
#                  not built and their tests are reported as skipped, with
#                  the reason.
#
# The programs run on the CPU too, with MPI_Allreduce standing in for
# NCCL, so that CI (no GPU) checks everything but the NCCL calls and the
# graph. ROCm would need RCCL (find_package(rccl), <rccl/rccl.h>: the same
# ncclXxx API), hip::host instead of CUDA::cudart and the hip* spellings of
# the runtime calls; these programs are CUDA only.

list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")

set(_mtsarray_nccl_cuda OFF)
if(MTSARRAY_HAS_CUDA OR mtsarray_cuda_FOUND)
    set(_mtsarray_nccl_cuda ON)
endif()
set(_mtsarray_nccl_reason "")
if(NOT _mtsarray_nccl_cuda)
    set(_mtsarray_nccl_reason "mtsarray was built without the CUDA backend")
elseif(NOT MPI_C_FOUND)
    set(_mtsarray_nccl_reason "no MPI (the ranks exchange NCCL's unique id through MPI)")
else()
    if(NOT DEFINED MTSARRAY_NCCL OR MTSARRAY_NCCL)
        find_package(CUDAToolkit)
        if(CUDAToolkit_FOUND)
            find_package(NCCL 2.18)
        endif()
    endif()
    if(NOT CUDAToolkit_FOUND AND (NOT DEFINED MTSARRAY_NCCL OR MTSARRAY_NCCL))
        set(_mtsarray_nccl_reason "CMake found no CUDA toolkit")
    elseif(NOT NCCL_FOUND AND (NOT DEFINED MTSARRAY_NCCL OR MTSARRAY_NCCL))
        set(_mtsarray_nccl_reason
            "no NCCL 2.18 or newer (pip install nvidia-nccl-cu13, or set NCCL_ROOT, then reconfigure)")
    endif()
endif()
if(_mtsarray_nccl_reason)
    set(_mtsarray_nccl_default OFF)
else()
    set(_mtsarray_nccl_default ON)
endif()
option(MTSARRAY_NCCL
    "Build the NCCL programs (examples/nccl_tensormap.c, bench/nccl_allreduce_bench.c) and their tests"
    ${_mtsarray_nccl_default})

set(MTSARRAY_NCCL_SKIPPED "")
if(MTSARRAY_NCCL AND _mtsarray_nccl_reason)
    message(FATAL_ERROR "MTSARRAY_NCCL=ON but ${_mtsarray_nccl_reason}")
elseif(NOT MTSARRAY_NCCL)
    set(MTSARRAY_NCCL_SKIPPED "${_mtsarray_nccl_reason}")
    if(NOT MTSARRAY_NCCL_SKIPPED)
        set(MTSARRAY_NCCL_SKIPPED "MTSARRAY_NCCL=OFF")
    endif()
else()
    get_property(_mtsarray_nccl_reported GLOBAL PROPERTY MTSARRAY_NCCL_REPORTED)
    if(NOT _mtsarray_nccl_reported)
        set_property(GLOBAL PROPERTY MTSARRAY_NCCL_REPORTED ON)
        message(STATUS "mtsarray: NCCL ${NCCL_VERSION} (${NCCL_LIBRARY})")
    endif()
endif()

# mtsarray_add_nccl_program(TARGET SOURCE [TESTS "name|ranks|arguments..." ...])
function(mtsarray_add_nccl_program target source)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "TESTS")
    mtsarray_add_mpi_program(${target} ${source} SKIPPED "${MTSARRAY_NCCL_SKIPPED}"
        LINK NCCL::NCCL CUDA::cudart_static TESTS ${ARG_TESTS})
endfunction()
