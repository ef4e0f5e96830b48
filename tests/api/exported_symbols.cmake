# ABI hygiene: the dynamic symbols the shared library defines must be exactly
# the allow-list (tests/api/exported_symbols.txt), nothing more (a leaked C++,
# cudart or HIP runtime symbol) and nothing less (a C API function lost).
#
#   cmake -DNM=<nm> -DLIBRARY=<libmtsarray.so> -DALLOW_LIST=<exported_symbols.txt>
#         [-DTEST_HOOKS=ON] -P exported_symbols.cmake

cmake_minimum_required(VERSION 3.22)

foreach(variable NM LIBRARY ALLOW_LIST)
    if(NOT DEFINED ${variable} OR "${${variable}}" STREQUAL "")
        message(FATAL_ERROR "exported_symbols.cmake: ${variable} is not set")
    endif()
endforeach()

execute_process(
    COMMAND "${NM}" -D --defined-only "${LIBRARY}"
    OUTPUT_VARIABLE nm_output
    ERROR_VARIABLE nm_error
    RESULT_VARIABLE nm_status)
if(NOT nm_status EQUAL 0)
    message(FATAL_ERROR "'${NM} -D --defined-only ${LIBRARY}' failed (${nm_status}): ${nm_error}")
endif()

# Linker-defined markers that every shared library carries.
set(ignored _init _fini __bss_start _edata _end __bss_start__ __bss_end__ _bss_end__ __end__)

string(REPLACE "\n" ";" lines "${nm_output}")
set(exported)
foreach(line IN LISTS lines)
    # "<address> <type> <name>[@@VERSION]"
    if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
        set(name "${CMAKE_MATCH_1}")
        if(NOT name IN_LIST ignored)
            list(APPEND exported "${name}")
        endif()
    endif()
endforeach()
list(REMOVE_DUPLICATES exported)

file(STRINGS "${ALLOW_LIST}" allowed REGEX "^[^#]")
if(TEST_HOOKS)
    list(APPEND allowed mtsarray_test_fail_after mtsarray_test_faults_injected mtsarray_test_live_arrays)
endif()

set(unexpected)
foreach(name IN LISTS exported)
    if(NOT name IN_LIST allowed)
        list(APPEND unexpected "${name}")
    endif()
endforeach()
set(missing)
foreach(name IN LISTS allowed)
    if(NOT name IN_LIST exported)
        list(APPEND missing "${name}")
    endif()
endforeach()

list(LENGTH exported exported_count)
if(unexpected OR missing)
    list(JOIN unexpected "\n    " unexpected_text)
    list(JOIN missing "\n    " missing_text)
    message(FATAL_ERROR
        "${LIBRARY} exports ${exported_count} symbols that do not match ${ALLOW_LIST}\n"
        "  exported but not allowed:\n    ${unexpected_text}\n"
        "  allowed but not exported:\n    ${missing_text}\n")
endif()
message(STATUS "${LIBRARY}: the ${exported_count} exported symbols match the allow-list")
