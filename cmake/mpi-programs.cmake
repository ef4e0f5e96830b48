# The MPI programs (examples/mpi_halo.c, bench/mpi_halo_bench.c) and their
# mpiexec tests. Included by examples/CMakeLists.txt (in the mtsarray build
# and standalone) and bench/CMakeLists.txt.
#
#   MTSARRAY_MPI   default: ON when CMake finds an MPI for C. Without MPI (or
#                  mpiexec) the programs' tests are registered anyway and
#                  reported as skipped, with the reason.
# (Included once per directory that uses it: the variables below are that
# directory's.)

set(_mtsarray_mpi_searched OFF)
if(NOT DEFINED MTSARRAY_MPI OR MTSARRAY_MPI)
    find_package(MPI COMPONENTS C)
    set(_mtsarray_mpi_searched ON)
endif()
if(MPI_C_FOUND)
    set(_mtsarray_mpi_default ON)
else()
    set(_mtsarray_mpi_default OFF)
endif()
option(MTSARRAY_MPI
    "Build the MPI halo exchange (examples/mpi_halo.c, bench/mpi_halo_bench.c) and its tests"
    ${_mtsarray_mpi_default})

set(MTSARRAY_MPI_SKIPPED "")
if(MTSARRAY_MPI)
    if(NOT MPI_C_FOUND)
        message(FATAL_ERROR "MTSARRAY_MPI=ON but CMake found no MPI for C "
            "(on Debian: apt-get install openmpi-bin libopenmpi-dev)")
    endif()
    if(NOT MPIEXEC_EXECUTABLE)
        set(MTSARRAY_MPI_SKIPPED "mpiexec was not found (set MPIEXEC_EXECUTABLE)")
    endif()
elseif(MPI_C_FOUND OR NOT _mtsarray_mpi_searched)
    set(MTSARRAY_MPI_SKIPPED "MTSARRAY_MPI=OFF")
else()
    set(MTSARRAY_MPI_SKIPPED
        "no MPI found (on Debian: apt-get install openmpi-bin libopenmpi-dev, then reconfigure with -DMTSARRAY_MPI=ON)")
endif()

# Open MPI needs to be told that oversubscribing the cores (4 ranks on a
# 2-core CI machine) and binding nothing is fine; MPICH's mpiexec does both
# by default and knows neither flag.
set(MTSARRAY_MPIEXEC_FLAGS "")
if(MTSARRAY_MPI AND MPIEXEC_EXECUTABLE)
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
        OUTPUT_VARIABLE _mtsarray_mpiexec_version ERROR_VARIABLE _mtsarray_mpiexec_version
        RESULT_VARIABLE _mtsarray_mpiexec_status)
    if(_mtsarray_mpiexec_version MATCHES "Open MPI|OpenRTE")
        set(MTSARRAY_MPIEXEC_FLAGS --oversubscribe --bind-to none)
    endif()
endif()
# Open MPI in containers and CI: it refuses to run as root unless told
# twice; the ranks of a test share one machine, so shared memory (vader,
# called sm since Open MPI 5, which keeps vader as an alias) and self are
# all the transports it needs, and probing network ones only adds warnings;
# the shared-memory single-copy mechanism (CMA) needs ptrace rights
# containers often withhold; and Open MPI 4's mpirun wants an ssh/rsh agent
# on PATH even for local ranks, which a minimal image may lack (`false` is
# never run for local ranks). Other MPIs ignore these.
set(MTSARRAY_MPI_TEST_ENVIRONMENT
    OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl=self,vader
    OMPI_MCA_btl_base_warn_component_unused=0
    OMPI_MCA_btl_vader_single_copy_mechanism=none
    OMPI_MCA_btl_sm_single_copy_mechanism=none
    OMPI_MCA_plm_rsh_agent=false)

# mtsarray_add_mpi_program(TARGET SOURCE [SKIPPED reason] [LINK libraries...]
#                          [TESTS "name|ranks|arguments..." ...])
# Builds TARGET from SOURCE (C11, linked to mtsarray, MPI and the LINK
# libraries) when MPI is there and no SKIPPED reason is given (a program
# that needs more than MPI, cmake/nccl-programs.cmake, says why it is not
# built), and registers each test (or its skip, with the reason).
function(mtsarray_add_mpi_program target source)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "" "SKIPPED" "TESTS;LINK")
    set(skipped "${MTSARRAY_MPI_SKIPPED}")
    if(NOT skipped AND ARG_SKIPPED)
        set(skipped "${ARG_SKIPPED}")
    endif()
    if(MTSARRAY_MPI AND NOT ARG_SKIPPED)
        add_executable(${target} ${source})
        target_link_libraries(${target} PRIVATE mtsarray::mtsarray MPI::MPI_C ${ARG_LINK})
        set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
        if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
            target_compile_options(${target} PRIVATE -Wall -Wextra)
            target_link_libraries(${target} PRIVATE m)
        endif()
    endif()
    if(skipped)
        message(STATUS "mtsarray: the tests of ${source} are skipped: ${skipped}")
    endif()
    foreach(test IN LISTS ARG_TESTS)
        string(REPLACE "|" ";" test "${test}")
        list(GET test 0 name)
        if(skipped)
            add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "skipped: ${skipped}")
            set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: ")
            continue()
        endif()
        list(GET test 1 ranks)
        list(SUBLIST test 2 -1 arguments)
        add_test(NAME ${name}
            COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${MTSARRAY_MPIEXEC_FLAGS}
                    ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${arguments} ${MPIEXEC_POSTFLAGS})
        # a hung exchange fails in 2 minutes instead of ctest's 25;
        # PROCESSORS keeps ctest -j from piling ranks onto the same cores
        set_tests_properties(${name} PROPERTIES
            ENVIRONMENT "${MTSARRAY_MPI_TEST_ENVIRONMENT}"
            PROCESSORS ${ranks}
            TIMEOUT 120)
    endforeach()
endfunction()
