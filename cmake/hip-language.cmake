# Enables CMake's HIP language for the HIP backend (src/hip/CMakeLists.txt
# includes it; CMake can then compile HIP in that directory and below).
#
# It makes `enable_language(HIP)` work out of the box with the ROCm that
# Debian and Ubuntu package (apt install hipcc), not only with AMD's
# /opt/rocm:
# - the HIP compiler is the clang that hipcc drives (clang++-15 on Debian 12;
#   /usr/bin/clang++ may be another clang, or missing);
# - that clang is told where ROCm and the device bitcode libraries are
#   (Debian: --rocm-path=/usr, /usr/lib/<multiarch>/amdgcn/bitcode), which it
#   does not find on its own outside /opt/rocm;
# - CMake < 3.27 only looks for hip-lang-config.cmake in <rocm>/lib/cmake,
#   while Debian installs it in <rocm>/lib/<multiarch>/cmake: a two-file
#   forwarding package in the build tree bridges the gap;
# - the GPU targets default to a fixed list instead of asking
#   rocm_agent_enumerator, which fails on machines without an AMD GPU.
# Every choice made here can be overridden on the command line:
# CMAKE_HIP_COMPILER (or $HIPCXX), CMAKE_HIP_FLAGS, CMAKE_HIP_ARCHITECTURES,
# CMAKE_HIP_COMPILER_ROCM_ROOT.

# gfx90a: MI200 series. gfx940: MI300 (the newest target that clang 15 and
# the ROCm 5.2 device libraries know; gfx941/gfx942 need ROCm >= 5.5, and
# gfx1100 device libraries ROCm >= 5.4).
if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES "gfx90a;gfx940" CACHE STRING
        "AMD GPU targets of the HIP backend (--offload-arch values)")
endif()

if(NOT CMAKE_HIP_COMPILER AND NOT DEFINED ENV{HIPCXX})
    # hipcc prints the clang command it would run; that clang is the one
    # built for this ROCm. (An explicit target keeps hipcc from running
    # rocm_agent_enumerator.)
    find_program(MTSARRAY_HIPCC NAMES hipcc
        HINTS ENV ROCM_PATH ENV HIP_PATH /opt/rocm PATH_SUFFIXES bin)
    if(MTSARRAY_HIPCC)
        execute_process(COMMAND ${CMAKE_COMMAND} -E env HIPCC_VERBOSE=1
                "${MTSARRAY_HIPCC}" --offload-arch=gfx90a --version
            OUTPUT_VARIABLE _hipcc_output ERROR_VARIABLE _hipcc_output)
        if(_hipcc_output MATCHES "hipcc-cmd: *\"?([^ \"]+)")
            set(CMAKE_HIP_COMPILER "${CMAKE_MATCH_1}" CACHE FILEPATH "HIP compiler (clang)")
        endif()
    endif()
endif()

find_program(MTSARRAY_HIPCONFIG NAMES hipconfig
    HINTS ENV ROCM_PATH ENV HIP_PATH /opt/rocm PATH_SUFFIXES bin)
if(MTSARRAY_HIPCONFIG)
    execute_process(COMMAND "${MTSARRAY_HIPCONFIG}" --rocmpath
        OUTPUT_VARIABLE _rocm_root OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(_rocm_root)
    if(CMAKE_LIBRARY_ARCHITECTURE)
        set(_multiarch_lib "${_rocm_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
    endif()
    find_path(MTSARRAY_HIP_DEVICE_LIB_PATH ocml.bc NO_DEFAULT_PATH
        PATHS "${_rocm_root}/amdgcn/bitcode" "${_rocm_root}/lib/amdgcn/bitcode"
              "${_multiarch_lib}/amdgcn/bitcode")
    if(MTSARRAY_HIP_DEVICE_LIB_PATH)
        string(APPEND CMAKE_HIP_FLAGS_INIT " --rocm-path=${_rocm_root}"
            " --rocm-device-lib-path=${MTSARRAY_HIP_DEVICE_LIB_PATH}")
    endif()

    if(CMAKE_VERSION VERSION_LESS 3.27 AND NOT CMAKE_HIP_COMPILER_ROCM_ROOT
       AND NOT EXISTS "${_rocm_root}/lib/cmake/hip-lang/hip-lang-config.cmake"
       AND EXISTS "${_multiarch_lib}/cmake/hip-lang/hip-lang-config.cmake")
        # CMake's compiler checks load it from projects that only enable
        # HIP and so do not search lib/<multiarch>: name its dependency.
        # (file(CONFIGURE) only writes when the content changes: CMake
        # re-runs itself when a file it loaded is newer than the build.)
        set(_forward "${CMAKE_BINARY_DIR}/hip-lang-forward/lib/cmake/hip-lang")
        file(CONFIGURE OUTPUT "${_forward}/hip-lang-config-version.cmake" @ONLY CONTENT
            "include(\"${_multiarch_lib}/cmake/hip-lang/hip-lang-config-version.cmake\")\n")
        string(CONCAT _config
            "if(NOT amd_comgr_DIR)\n"
            "    set(amd_comgr_DIR \"${_multiarch_lib}/cmake/amd_comgr\")\n"
            "endif()\n"
            "include(\"${_multiarch_lib}/cmake/hip-lang/hip-lang-config.cmake\")\n")
        file(CONFIGURE OUTPUT "${_forward}/hip-lang-config.cmake" CONTENT "${_config}" @ONLY)
        set(CMAKE_HIP_COMPILER_ROCM_ROOT "${CMAKE_BINARY_DIR}/hip-lang-forward")
    endif()
endif()

enable_language(HIP)
