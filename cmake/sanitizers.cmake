# Reliability builds: sanitizers, libFuzzer targets and the test-only fault
# injection hook. None of them is on by default; a release build carries
# nothing of them. scripts/sanitizers.sh drives them.
#
#   MTSARRAY_SANITIZE          ""      | address (ASan + UBSan) | thread (TSan)
#   MTSARRAY_BUILD_FUZZERS     OFF     libFuzzer targets in tests/fuzz (clang only)
#   MTSARRAY_TEST_HOOKS        OFF     src/base/fault_injection.cpp, src/api/test_hooks.cpp:
#                                      the exported mtsarray_test_* functions
#                                      (fault injection, live-array count)
#
# The sanitizer flags are added to every C/C++ target of the project (library,
# tests, fuzzers) and to every link, so that the whole process is instrumented.
# CUDA device code is never instrumented; nvcc's host code is not either.

set(MTSARRAY_SANITIZE "" CACHE STRING
    "Build with a sanitizer: '' (none), 'address' (ASan + UBSan) or 'thread' (TSan)")
set_property(CACHE MTSARRAY_SANITIZE PROPERTY STRINGS "" address thread)
option(MTSARRAY_BUILD_FUZZERS "Build the libFuzzer targets in tests/fuzz (needs clang)" OFF)
option(MTSARRAY_TEST_HOOKS
    "Compile the test-only hooks (fault injection, live-array count) into the library (never for a release)" OFF)

set(_mtsarray_sanitizer_flags)
if(MTSARRAY_SANITIZE STREQUAL "address")
    set(_mtsarray_sanitizer_flags
        -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
elseif(MTSARRAY_SANITIZE STREQUAL "thread")
    set(_mtsarray_sanitizer_flags -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT MTSARRAY_SANITIZE STREQUAL "")
    message(FATAL_ERROR
        "MTSARRAY_SANITIZE must be '', 'address' or 'thread' (got '${MTSARRAY_SANITIZE}')")
endif()

if(_mtsarray_sanitizer_flags)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang|GNU")
        message(FATAL_ERROR "MTSARRAY_SANITIZE needs clang or gcc (got ${CMAKE_CXX_COMPILER_ID})")
    endif()
    # -g: symbolised reports with line numbers, whatever the build type
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_mtsarray_sanitizer_flags};-g>")
    add_link_options(${_mtsarray_sanitizer_flags})
    if(CMAKE_C_COMPILER_ID MATCHES "Clang")
        # a C program (tests/api/c_api_test.c) linking the C++ library needs the C++
        # parts of the sanitizer runtimes (UBSan's vptr checks), which clang
        # only links for C++ by default (and they need libstdc++ itself)
        add_link_options("$<$<LINK_LANGUAGE:C>:-fsanitize-link-c++-runtime;-lstdc++>")
    endif()
    message(STATUS "mtsarray: sanitizer build (${MTSARRAY_SANITIZE}): ${_mtsarray_sanitizer_flags}")
endif()

if(MTSARRAY_BUILD_FUZZERS)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "MTSARRAY_BUILD_FUZZERS needs clang (libFuzzer), got ${CMAKE_CXX_COMPILER_ID}")
    endif()
    if(NOT MTSARRAY_SANITIZE STREQUAL "address")
        # the sanitizer runtime also provides the coverage callbacks that
        # -fsanitize=fuzzer-no-link inserts into the library
        message(FATAL_ERROR "MTSARRAY_BUILD_FUZZERS needs MTSARRAY_SANITIZE=address")
    endif()
endif()

if(MTSARRAY_TEST_HOOKS)
    # every target (the library, the CUDA/HIP objects, the tests) sees the
    # same src/base/fault_injection.hpp; without it the hooks compile to nothing
    add_compile_definitions(MTSARRAY_TEST_HOOKS=1)
endif()

# Called from src/CMakeLists.txt for the library's object libraries: with
# MTSARRAY_BUILD_FUZZERS, the fuzz targets get coverage feedback from the
# library, not only from their own code (-fsanitize=fuzzer-no-link). Only
# there: the tests and the simulated runtime linked into the same build
# have nothing to tell a fuzzer, and the instrumentation made them 10% slower
# to compile.
function(mtsarray_add_fuzzer_coverage target)
    if(MTSARRAY_BUILD_FUZZERS)
        target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
    endif()
endfunction()

# Called from src/CMakeLists.txt: compiles the fault injection hook into
# `target` when MTSARRAY_TEST_HOOKS is ON; does nothing otherwise.
function(mtsarray_add_test_hooks target)
    if(MTSARRAY_TEST_HOOKS)
        target_sources(${target} PRIVATE
            ${PROJECT_SOURCE_DIR}/src/base/fault_injection.cpp
            ${PROJECT_SOURCE_DIR}/src/api/test_hooks.cpp)
        message(STATUS "mtsarray: test hooks compiled in (fault injection, live-array count; test-only build)")
    endif()
endfunction()
