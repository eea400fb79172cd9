#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test
# suite: the Release build's tests, then the same code under the sanitizers
# (scripts/sanitize.sh) and a short run of every fuzz target from its seed
# corpus (scripts/fuzz.sh). Each stage's wall and CPU time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

# CPU seconds (user + system) of this script's finished children so far.
cpu_seconds() {
  local stat
  read -ra stat </proc/$$/stat
  echo $(((stat[15] + stat[16]) / $(getconf CLK_TCK)))
}

timings=()
stage() {  # stage <name> <command...>
  local name=$1 start=$SECONDS cpu
  cpu=$(cpu_seconds)
  shift
  echo "=== $name"
  "$@"
  timings+=("$(printf '%-24s %5ds wall %6ds cpu' "$name" $((SECONDS - start)) $(($(cpu_seconds) - cpu)))")
}

stage "install dependencies" scripts/install-deps.sh
stage "release build" scripts/build.sh
stage "release tests" ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
stage "asan+ubsan build+tests" scripts/sanitize.sh asan
stage "tsan build+tests" scripts/sanitize.sh tsan
stage "fuzz build+20s each" scripts/fuzz.sh 20
printf '%s\n' "stage times:" "${timings[@]}" "$(printf '%-24s %5ds wall %6ds cpu' total "$SECONDS" "$(cpu_seconds)")"
