# cmake -DBUILD_DIR= -DWORK_DIR= -DSOURCE_DIR= -DDATA= -DGENERATOR= -DCXX= -DLIBDIR= -DDATADIR= -P installed_wrappers.cmake
#
# A third party composing plugins with the installed SDK alone:
# 1. installs the megahost build in BUILD_DIR to WORK_DIR/prefix;
# 2. builds examples/wrappers (a kernels and a comm wrapper) and the
#    installed plugin template out of tree against that prefix;
# 3. trains two steps through both wrappers, wrapping the installed cpu
#    kernels and threads communicator, and finds each wrapper's summary in
#    the log; --list_plugins shows the template's component.
set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${out}\n${err}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

function(expect_match text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "expected a match of '${regex}' in:\n${text}")
  endif()
endfunction()

function(build_against_prefix source binary)
  run("configure ${source}" ${CMAKE_COMMAND} -S "${source}" -B "${binary}" -G "${GENERATOR}"
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
  run("build ${source}" ${CMAKE_COMMAND} --build "${binary}")
  file(STRINGS "${binary}/CMakeCache.txt" sdk_dir REGEX "^megahost-sdk_DIR:")
  expect_match("${sdk_dir}" "=${prefix}/")
endfunction()

run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
build_against_prefix("${SOURCE_DIR}/examples/wrappers" "${WORK_DIR}/wrappers")
build_against_prefix("${prefix}/${DATADIR}/megahost-sdk/template" "${WORK_DIR}/template")

set(megahost ${CMAKE_COMMAND} -E env --unset=MEGAHOST_PLUGIN_PATH OPENBLAS_NUM_THREADS=1 "${prefix}/bin/megahost")
run("megahost --list_plugins" ${megahost} --plugin_path "${WORK_DIR}/template" --list_plugins)
expect_match("${output}" "recompute +my_policy +0.1.0")
run("two training steps through both wrappers" ${megahost} --plugin_path "${WORK_DIR}/wrappers"
    --config "${SOURCE_DIR}/examples/wrappers/wrappers.toml"
    train.steps=2 model.layers=2 model.hidden=64 model.heads=2 model.seq_len=32
    train.global_batch=2 train.micro_batch=1 train.eval_interval=0 "data.path=${DATA}")
expect_match("${output}" "timed_kernels rank 0 over cpu: [^\n]*gemm=")
expect_match("${output}" "timed_kernels rank 1 over cpu: [^\n]*gemm=")
expect_match("${output}" "counted_comm over threads: [1-9][0-9]* collectives")
