# cmake -DMPIEXEC=... -DNP_FLAG=-n -DNP=4 -DPROGRAM=... -DMODE=kill|abort
#       -DEXPECT=<regex> -P mpi_fault.cmake
#
# Runs the fault-injection program under mpiexec and checks that mpiexec
# stops every rank: it exits non-zero within 30 s, its output matches EXPECT
# (the failed rank named), and no survivor had to time out by itself.
execute_process(
  COMMAND ${MPIEXEC} ${NP_FLAG} ${NP} --oversubscribe ${PROGRAM} ${MODE}
  TIMEOUT 30
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
message("${out}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "mpiexec did not stop within 30 s: ${rc}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "mpiexec exited 0 although a rank failed")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "mpiexec's output does not match '${EXPECT}'")
endif()
if(out MATCHES "DEADLINE|timed out")
  message(FATAL_ERROR "a surviving rank timed out by itself: mpiexec did not stop it")
endif()
message(STATUS "mpiexec exited ${rc} naming the failed rank")
