# cmake -DBUILD_DIR= -DWORK_DIR= -DSOURCE_DIR= -DGENERATOR= -DCXX= -DLIBDIR= -P installed_sdk.cmake
#
# 1. installs the megahost build in BUILD_DIR to WORK_DIR/prefix, then moves
#    the prefix elsewhere: an install must not depend on where it was made;
# 2. checks that no binary names SOURCE_DIR or BUILD_DIR: the shipped files are
#    found relative to the binary (host/data/share_dir.hpp), not compiled in;
# 3. configures and builds the installed examples/ against that prefix (and
#    checks that find_package took the SDK from there);
# 4. runs the installed megahost from an empty working folder, with no user
#    profile folder: --list_plugins must show the example and the installed
#    plugins; the embedded default run trains (its data from share/megahost);
#    two training steps with the example policy selected from the installed
#    example's TOML succeed; the tuner finds the shipped dgx_h100 profile;
# 5. where a private mount namespace can be made, runs a copy of the install
#    with the source and build trees hidden (below).
set(installed_at "${WORK_DIR}/prefix")
set(prefix "${WORK_DIR}/moved")
set(example "${WORK_DIR}/example")
set(cwd "${WORK_DIR}/cwd")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${cwd}" "${WORK_DIR}/home")

# Runs a command; fails the test with its output unless it exits 0. The
# output is left in `output`.
function(run what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${cwd}" RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${out}\n${err}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

function(expect_in text expected)
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${expected}' in:\n${text}")
  endif()
endfunction()

# Stripped, as a user installs: debug information records the build folder.
run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${installed_at}" --strip)
file(RENAME "${installed_at}" "${prefix}")
foreach(tree IN ITEMS "${SOURCE_DIR}" "${BUILD_DIR}")
  file(GLOB binaries "${prefix}/bin/*" "${prefix}/${LIBDIR}/megahost/plugins/*")
  foreach(binary IN LISTS binaries)
    file(STRINGS "${binary}" named REGEX "${tree}/")
    if(named)
      list(GET named 0 first)
      message(FATAL_ERROR "${binary} names the tree ${tree}: ${first}")
    endif()
  endforeach()
endforeach()
foreach(shipped IN ITEMS share/megahost/configs/default.toml share/megahost/hardware/dgx_h100.toml
                         share/megahost/data/corpus_byte.idx share/megahost/data/gpt2/vocab.json
                         share/megahost/examples/CMakeLists.txt share/doc/megahost/config.md)
  if(NOT EXISTS "${prefix}/${shipped}")
    message(FATAL_ERROR "the install lacks ${shipped}")
  endif()
endforeach()
run("configure the example" ${CMAKE_COMMAND} -S "${prefix}/share/megahost/examples" -B "${example}" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run("build the example" ${CMAKE_COMMAND} --build "${example}")
file(STRINGS "${example}/CMakeCache.txt" sdk_dir REGEX "^megahost-sdk_DIR:")
expect_in("${sdk_dir}" "=${prefix}/")

set(megahost ${CMAKE_COMMAND} -E env --unset=MEGAHOST_PLUGIN_PATH --unset=XDG_CONFIG_HOME "HOME=${WORK_DIR}/home"
    OPENBLAS_NUM_THREADS=1 "${prefix}/bin/megahost")
run("megahost --list_plugins" ${megahost} --plugin_path "${example}" --list_plugins)
expect_in("${output}" "${example}/mh_mlp_only.so")
expect_in("${output}" "${prefix}/${LIBDIR}/megahost/plugins/mh_recompute.so")
set(small train.steps=2 model.layers=2 model.hidden=64 model.heads=2 model.seq_len=32 train.global_batch=4
    train.micro_batch=1 train.eval_interval=0)
run("the default run, dry" ${megahost} --dry_run)
run("the default run" ${megahost} ${small})
run("two training steps with mlp_only" ${megahost} --plugin_path "${example}"
    --config "${prefix}/share/megahost/examples/mlp_only.toml" ${small})
# A tuner run on the shipped profile, its config in the working folder: the
# tables land beside it (output.dir is relative to the config).
file(WRITE "${cwd}/tune.toml" "[model]\nlayers = 2\nhidden = 64\nheads = 4\nseq_len = 32\n\n"
     "[train]\nglobal_batch = 8\nmicro_batch = 1\n\n"
     "[data]\npath = \"${prefix}/share/megahost/data/corpus_byte\"\n\n"
     "[tuner]\nplugin = \"grid\"\ncluster = \"dgx_h100\"\ntensor = \"1\"\npipeline = \"1\"\n"
     "micro_batch = \"1\"\nrecompute = \"none\"\n")
run("the tuner on dgx_h100" ${megahost} --config tune.toml)
expect_in("${output}" "on dgx_h100")
if(NOT EXISTS "${cwd}/tuner_out/tuned.toml")
  message(FATAL_ERROR "the tuner wrote no ${cwd}/tuner_out/tuned.toml:\n${output}")
endif()


# 5. With the source and build trees truly out of view — empty folders
#    mounted over them in a private mount namespace, where this user may make
#    one — a copy of the install outside both still runs the default dry run
#    and the tuner on the shipped profile. Elsewhere step 2 stands for it.
execute_process(COMMAND unshare -m true RESULT_VARIABLE private_mounts OUTPUT_QUIET ERROR_QUIET)
if(NOT private_mounts EQUAL 0)
  message(STATUS "no private mount namespace here (unshare -m): the trees stay in view")
  return()
endif()
set(tmp "/tmp")
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
endif()
string(RANDOM LENGTH 12 tag)
set(away "${tmp}/megahost_install_${tag}")
file(COPY "${prefix}/" DESTINATION "${away}")
file(MAKE_DIRECTORY "${away}/home")
# The copy's tune.toml names its data relative to itself.
file(READ "${cwd}/tune.toml" tune)
string(REPLACE "${prefix}/share" "share" tune "${tune}")
file(WRITE "${away}/tune.toml" "${tune}")
set(hide "mount -t tmpfs none '${SOURCE_DIR}' && ( [ ! -d '${BUILD_DIR}' ] || mount -t tmpfs none '${BUILD_DIR}' )")
set(away_megahost "env -u MEGAHOST_PLUGIN_PATH -u XDG_CONFIG_HOME HOME='${away}/home' OPENBLAS_NUM_THREADS=1 '${away}/bin/megahost'")
execute_process(COMMAND unshare -m sh -c
    "${hide} && [ ! -e '${SOURCE_DIR}/configs' ] && cd '${away}' && ${away_megahost} --dry_run && ${away_megahost} --config tune.toml"
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${away}")  # before any verdict: nothing is left in the temporary folder
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the moved install with the trees hidden failed (${status}):\n${out}\n${err}")
endif()
expect_in("${out}${err}" "on dgx_h100")
