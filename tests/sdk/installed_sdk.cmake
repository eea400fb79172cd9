# cmake -DBUILD_DIR= -DWORK_DIR= -DEXAMPLE_DIR= -DDATA= -DGENERATOR= -DCXX= -DLIBDIR= -P installed_sdk.cmake
#
# 1. installs the megahost build in BUILD_DIR to WORK_DIR/prefix;
# 2. configures and builds EXAMPLE_DIR against that prefix (and checks that
#    find_package took the SDK from there);
# 3. runs the installed megahost: --list_plugins must show the example and
#    the installed plugins, and two training steps with the example policy
#    selected from TOML must succeed.
set(prefix "${WORK_DIR}/prefix")
set(example "${WORK_DIR}/example")
file(REMOVE_RECURSE "${WORK_DIR}")

# Runs a command; fails the test with its output unless it exits 0. The
# output is left in `output`.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${out}\n${err}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

function(expect_in text expected)
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${expected}' in:\n${text}")
  endif()
endfunction()

run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run("configure the example" ${CMAKE_COMMAND} -S "${EXAMPLE_DIR}" -B "${example}" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run("build the example" ${CMAKE_COMMAND} --build "${example}")
file(STRINGS "${example}/CMakeCache.txt" sdk_dir REGEX "^megahost-sdk_DIR:")
expect_in("${sdk_dir}" "=${prefix}/")

set(megahost ${CMAKE_COMMAND} -E env --unset=MEGAHOST_PLUGIN_PATH OPENBLAS_NUM_THREADS=1 "${prefix}/bin/megahost")
run("megahost --list_plugins" ${megahost} --plugin_path "${example}" --list_plugins)
expect_in("${output}" "${example}/mh_mlp_only.so")
expect_in("${output}" "${prefix}/${LIBDIR}/megahost/plugins/mh_recompute.so")
run("two training steps with mlp_only" ${megahost} --plugin_path "${example}" --config "${EXAMPLE_DIR}/mlp_only.toml"
    train.steps=2 model.layers=2 model.hidden=64 model.heads=2 model.seq_len=32
    train.global_batch=2 train.micro_batch=2 train.eval_interval=0 "data.path=${DATA}")
