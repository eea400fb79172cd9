#!/usr/bin/env bash
# The sanitizer stages of CI (scripts/test.sh runs them after the Release
# build and its tests). Each builds Debug at -O1 (fast enough to run the
# suite, still precise) with the sanitizers and treats any report as a
# failure: UBSan is built with -fno-sanitize-recover=all and every runtime
# halts on the first error.
#   asan  every test in an ASan + UBSan build, build-asan/
#   tsan  the tests where ranks are threads (communicator, multi-rank
#         training, the thread fault tests, asynchronous checkpoint writers) in a TSan build, build-tsan/
#   scripts/sanitize.sh [asan|tsan]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MEGAHOST_JOBS:-2}

configure() {  # configure <dir> <sanitizers>
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
    -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DMEGAHOST_SANITIZE="$2" >/dev/null
}

# The tests that run ranks under mpiexec, by name.
mpi_tests='[._/][Mm]pi|[Mm]piexec'

# OpenMPI 4.1 does not free what its MCA components allocate, and unloads
# them in MPI_Finalize before LeakSanitizer looks: the leaks show up with
# "<unknown module>" frames that no suppression can match. So the tests under
# mpiexec run without leak checking; every other ASan and UBSan check stays on.
asan() {
  configure build-asan address,undefined
  cmake --build build-asan -j"$jobs"
  local asan=check_initialization_order=1:strict_init_order=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The tuner's fidelity check measures speed, which a sanitizer build does not have.
  ASAN_OPTIONS=$asan:detect_leaks=1 \
    ctest --test-dir build-asan -E "$mpi_tests|^tuner_fidelity\$" --output-on-failure -j"$jobs" --timeout 600
  ASAN_OPTIONS=$asan:detect_leaks=0 \
    ctest --test-dir build-asan -R "$mpi_tests" --output-on-failure -j"$jobs" --timeout 600
}

# Ranks as threads: the threads communicator, the layout and training tests
# that run megahost with several thread ranks, and the thread fault tests.
# MPI runs are left out: one rank per process has no threads of ours to race.
tsan_tests='^(comm\.|comm_threads_plugin_load$|parallel\.|faults\.|checkpoint\.(AsyncSave|StopSignal)\.)'
tsan_targets=(comm_threads_test comm_plugin_load megahost parallel_equivalence_tests fault_kernels checkpoint_resume_tests)

# libgomp and OpenBLAS are not built with TSan: it cannot see how their thread
# pools synchronise and would report the kernels' op loops as races. One thread
# per OpenMP team and no OpenBLAS pool keep every op on its rank's thread, so
# what TSan checks is what ranks share: the communicator, the host's run
# state, metrics and logging. The op loops' own threading is covered by the
# ASan stage and the kernels' numerical tests. scripts/tsan.supp says why
# oneDNN's frames are suppressed.
tsan() {
  configure build-tsan thread
  cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}"
  OMP_THREAD_LIMIT=1 OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp \
    ctest --test-dir build-tsan -R "$tsan_tests" -E "$mpi_tests" --output-on-failure -j"$jobs" --timeout 600
}

stages=("$@")
((${#stages[@]})) || stages=(asan tsan)
for stage in "${stages[@]}"; do
  case $stage in
    asan | tsan) "$stage" ;;
    *) echo "unknown stage '$stage'; use asan or tsan" >&2 && exit 2 ;;
  esac
done
