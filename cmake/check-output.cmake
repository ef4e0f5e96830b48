# cmake -DPROGRAM=<path> -DEXPECTED=<file> [-DARGUMENTS=a;b] -P check-output.cmake
#
# Runs PROGRAM and compares what it prints (stdout) with EXPECTED, line for
# line: the quick starts of the documentation show EXPECTED as the output of
# the run CI makes, so the page can not drift from the program. A mismatch
# prints both and fails; so does a non-zero exit status.
if(NOT PROGRAM OR NOT EXPECTED)
    message(FATAL_ERROR "check-output.cmake needs -DPROGRAM=... and -DEXPECTED=...")
endif()
execute_process(COMMAND ${PROGRAM} ${ARGUMENTS}
    OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} exited with ${status}:\n${actual}${errors}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${PROGRAM} printed\n---\n${actual}---\nbut ${EXPECTED} (the output the "
        "documentation shows) says\n---\n${expected}---\nUpdate ${EXPECTED} if the new output is right.")
endif()
message(STATUS "${PROGRAM}: the output is ${EXPECTED}")
