# cmake -DPROGRAM=<path> -DEXPECTED=<file> [-DARGUMENTS=a;b] [-DMACHINE_LINES=<regex>]
#       -P check-output.cmake
#
# Runs PROGRAM and compares what it prints (stdout) with EXPECTED, line for
# line: the quick starts of the documentation show EXPECTED as the output of
# the run CI makes, so the page can not drift from the program. A mismatch
# prints both and fails; so does a non-zero exit status. A line that starts
# with MACHINE_LINES (a regex: "CUDA[ :]") says what this machine has, a GPU
# or why not: it must be there, but its text is not compared.
if(NOT PROGRAM OR NOT EXPECTED)
    message(FATAL_ERROR "check-output.cmake needs -DPROGRAM=... and -DEXPECTED=...")
endif()
execute_process(COMMAND ${PROGRAM} ${ARGUMENTS}
    OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} exited with ${status}:\n${actual}${errors}")
endif()
file(READ ${EXPECTED} expected)
set(compared_actual "\n${actual}")
set(compared_expected "\n${expected}")
if(MACHINE_LINES)
    string(REGEX REPLACE "\n${MACHINE_LINES}[^\n]*" "\n<this machine>" compared_actual "${compared_actual}")
    string(REGEX REPLACE "\n${MACHINE_LINES}[^\n]*" "\n<this machine>" compared_expected "${compared_expected}")
endif()
if(NOT compared_actual STREQUAL compared_expected)
    message(FATAL_ERROR "${PROGRAM} printed\n---\n${actual}---\nbut ${EXPECTED} (the output the "
        "documentation shows) says\n---\n${expected}---\nUpdate ${EXPECTED} if the new output is right.")
endif()
message(STATUS "${PROGRAM}: the output is ${EXPECTED}")
