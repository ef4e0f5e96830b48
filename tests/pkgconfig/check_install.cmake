# The install tree of mtsarray used the way a user without CMake (or with
# another CMake project) would. Run by ctest as
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DPKG_CONFIG=...
#         -DC_COMPILER=... [-DFortran_COMPILER=...] -DCONFIG=...
#         -Dmetatensor_DIR=... -DHAS_CUDA=0|1 -DHAS_HIP=0|1 -DVERSION=<major.minor>
#         -P check_install.cmake
# 1. `cmake --install` into a scratch prefix;
# 2. consumer.c compiled with `pkg-config --cflags --libs mtsarray` and run;
# 3. with the Fortran module installed: the installed example_md.f90
#    compiled with `pkg-config --cflags --libs mtsarray-fortran` and run;
# 4. find_package(mtsarray CONFIG REQUIRED COMPONENTS <c>) for cpu, cuda and
#    hip: found exactly when the backend was built, a clean configure error
#    otherwise.
# Prints "SKIPPED: <reason>" (ctest SKIP_REGULAR_EXPRESSION) without pkg-config.

cmake_minimum_required(VERSION 3.22)

function(run_checked what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE error)
    if(NOT status EQUAL 0)
        message(FATAL_ERROR "FAILED: ${what} (exit ${status})\n${ARGN}\n${output}\n${error}")
    endif()
    message(STATUS "${what}: ok\n${output}")
endfunction()

function(pkg_config result)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PC_DIR} ${PKG_CONFIG} ${ARGN}
        RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE error OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT status EQUAL 0)
        message(FATAL_ERROR "FAILED: pkg-config ${ARGN}\n${error}")
    endif()
    separate_arguments(output UNIX_COMMAND "${output}")
    set(${result} ${output} PARENT_SCOPE)
endfunction()

set(PREFIX ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# ---- 1. install --------------------------------------------------------------
set(config_args)
if(CONFIG)
    set(config_args --config ${CONFIG})
endif()
run_checked("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} ${config_args})
file(GLOB_RECURSE PC_FILE ${PREFIX}/*/mtsarray.pc)
if(NOT PC_FILE)
    message(FATAL_ERROR "FAILED: no mtsarray.pc under ${PREFIX}")
endif()
get_filename_component(PC_DIR ${PC_FILE} DIRECTORY)

# ---- 4. find_package components (needs no pkg-config) --------------------------
foreach(component cpu cuda hip)
    set(expected TRUE)
    if((component STREQUAL "cuda" AND NOT HAS_CUDA) OR (component STREQUAL "hip" AND NOT HAS_HIP))
        set(expected FALSE)
    endif()
    set(project ${WORK_DIR}/components-${component})
    file(MAKE_DIRECTORY ${project})
    file(WRITE ${project}/CMakeLists.txt
        "cmake_minimum_required(VERSION 3.22)\n"
        "project(components LANGUAGES CXX)\n"
        "find_package(mtsarray ${VERSION} CONFIG REQUIRED COMPONENTS ${component})\n"
        "message(STATUS \"mtsarray ${component}: found\")\n")
    execute_process(
        COMMAND ${CMAKE_COMMAND} -S ${project} -B ${project}/build
            -DCMAKE_PREFIX_PATH=${PREFIX} -Dmetatensor_DIR=${metatensor_DIR}
        RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE error)
    if(expected AND NOT status EQUAL 0)
        message(FATAL_ERROR "FAILED: find_package(mtsarray COMPONENTS ${component}) failed on an "
                            "install that has it\n${output}\n${error}")
    elseif(NOT expected AND status EQUAL 0)
        message(FATAL_ERROR "FAILED: find_package(mtsarray COMPONENTS ${component}) succeeded on an "
                            "install without it\n${output}")
    elseif(NOT expected AND NOT error MATCHES "mtsarray")
        message(FATAL_ERROR "FAILED: the error for a missing component does not name mtsarray:\n${error}")
    endif()
    message(STATUS "find_package(mtsarray COMPONENTS ${component}): found = ${expected}, as expected")
endforeach()

# ---- 2. a C program through pkg-config ---------------------------------------------
if(NOT PKG_CONFIG OR NOT EXISTS "${PKG_CONFIG}")
    message("SKIPPED: pkg-config is not installed (the find_package checks passed)")
    return()
endif()
pkg_config(cflags --cflags mtsarray)
pkg_config(libs --libs mtsarray)
pkg_config(rpath --variable=rpath_flags mtsarray)
pkg_config(version --modversion mtsarray)
message(STATUS "pkg-config mtsarray ${version}: ${cflags} ${libs} ${rpath}")
run_checked("compile consumer.c" ${C_COMPILER} -std=c99 -Wall -Wextra -Werror
    ${SOURCE_DIR}/consumer.c ${cflags} -o ${WORK_DIR}/consumer ${libs} ${rpath})
run_checked("run consumer" ${WORK_DIR}/consumer)

# ---- 3. the Fortran example through pkg-config ---------------------------------------
if(Fortran_COMPILER)
    pkg_config(fflags --cflags mtsarray-fortran)
    pkg_config(flibs --libs mtsarray-fortran)
    pkg_config(fmoddir --variable=fmoddir mtsarray-fortran)
    run_checked("compile the installed example_md.f90" ${Fortran_COMPILER}
        ${fmoddir}/example_md.f90 ${fflags} -o ${WORK_DIR}/example_md ${flibs} ${rpath})
    run_checked("run example_md" ${WORK_DIR}/example_md)
endif()
