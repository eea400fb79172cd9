# cmake -DCOMMAND=<program|arg|...> -DEXPECT=<regex> [-DSTATUS=<exit status>]
#       -P expect_failure.cmake
#
# Runs COMMAND ('|' separates its arguments) and checks what a user would:
# it stops by itself within 30 s, exits non-zero (exactly STATUS when given),
# its output matches EXPECT (the failed rank or plugin named), and it neither
# crashed nor tripped a sanitizer on the way out.
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} TIMEOUT 30 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "did not stop within 30 s (${rc})")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "exited 0 although the run failed")
endif()
if(DEFINED STATUS AND NOT rc EQUAL STATUS)
  message(FATAL_ERROR "exited ${rc}, expected ${STATUS}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
if(out MATCHES "terminate called|Segmentation fault|Sanitizer|runtime error:")
  message(FATAL_ERROR "the failure was not handled: it crashed or tripped a sanitizer")
endif()
message(STATUS "exited ${rc} with the expected message")
