# Link-time optimisation of the host library.
#
# A call into mtsarray crosses a dozen small functions spread over the
# sources (the handle lookup, the backend registry, the dtype and shape
# checks, the allocator): without LTO each is an out-of-line call. With it
# they inline across files, which takes 10-25% off the fixed cost of a call
# (the "moves=1" move_data and smallest "create" rows of mtsarray-bench).
#
#   MTSARRAY_LTO   ON   optimised builds (Release, RelWithDebInfo,
#                       MinSizeRel) of the library are link-time optimised,
#                       when the compiler supports it
#
# Not applied to sanitizer builds: they check, they do not measure, and an
# instrumented LTO link is slow. CUDA and HIP objects are not link-time
# optimised (their host code comes from nvcc and hipcc); they are linked into
# the optimised library as they are.
#
# The tests and benchmarks that link the library's objects directly
# (mtsarray_internal) must be able to link them without LTO: with GCC the
# objects carry both the intermediate code and machine code
# (-ffat-lto-objects); with other compilers those programs are link-time
# optimised too.

option(MTSARRAY_LTO "Link-time optimise the host library in optimised builds" ON)

set(MTSARRAY_LTO_ENABLED OFF)
if(MTSARRAY_LTO AND MTSARRAY_SANITIZE STREQUAL "")
    include(CheckIPOSupported)
    check_ipo_supported(RESULT _mtsarray_ipo_supported OUTPUT _mtsarray_ipo_output LANGUAGES CXX)
    if(_mtsarray_ipo_supported)
        set(MTSARRAY_LTO_ENABLED ON)
    else()
        message(STATUS "mtsarray: no link-time optimisation, ${CMAKE_CXX_COMPILER_ID} does not support it here")
    endif()
endif()

set(_mtsarray_lto_configurations RELEASE RELWITHDEBINFO MINSIZEREL)

# Link-time optimises `target` (a program or library linking LTO objects).
function(mtsarray_link_time_optimize target)
    if(MTSARRAY_LTO_ENABLED)
        foreach(configuration ${_mtsarray_lto_configurations})
            set_property(TARGET ${target} PROPERTY INTERPROCEDURAL_OPTIMIZATION_${configuration} ON)
        endforeach()
    endif()
endfunction()

# Compiles the object library `target` for link-time optimisation, in a form
# that programs linked without it can use as well (see above).
function(mtsarray_link_time_optimize_objects target)
    if(MTSARRAY_LTO_ENABLED)
        mtsarray_link_time_optimize(${target})
        if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
            target_compile_options(${target} PRIVATE
                "$<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-ffat-lto-objects>")
        endif()
    endif()
endfunction()

# Compiles `sources` (of the current directory) as regular objects even in a
# link-time optimised library. For kernels tuned file by file whose loops call
# nothing outside their file: LTO brings them nothing, and re-deciding their
# inlining with the whole library in view made the transposes of
# src/cpu/strided_copy.cpp 15% slower on the "swap_axes f32 1000x1000"
# rows of mtsarray-bench.
function(mtsarray_compile_without_lto)
    if(MTSARRAY_LTO_ENABLED)
        set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS "-fno-lto")
    endif()
endfunction()

# For the programs that link the objects: needed when they are not fat.
function(mtsarray_link_time_optimize_consumer target)
    if(MTSARRAY_LTO_ENABLED AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
        mtsarray_link_time_optimize(${target})
    endif()
endfunction()

if(MTSARRAY_LTO_ENABLED)
    message(STATUS "mtsarray: the host library is link-time optimised in optimised builds (MTSARRAY_LTO)")
endif()
