# The one Python every Python test runs with: MEGAHOST_PYTHON when set, else
# what scripts/python-env names (the environment of scripts/install-deps.sh,
# else python3 on PATH). Asked at every configure, so that a build configured
# before the environment existed picks it up on the next one.
set(MEGAHOST_PYTHON "" CACHE FILEPATH "python for the Python tests; empty: scripts/python-env's answer")
set(megahost_python "${MEGAHOST_PYTHON}")
if(NOT megahost_python)
  execute_process(COMMAND "${CMAKE_SOURCE_DIR}/scripts/python-env" OUTPUT_VARIABLE megahost_python
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    set(megahost_python "")
  endif()
endif()
message(STATUS "Python tests run with: ${megahost_python}")
