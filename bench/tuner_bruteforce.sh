#!/usr/bin/env bash
# The tuner against brute force on this machine: calibrates the local CPU
# profile if there is none, tunes bench/tuner_small.toml with it, trains
# every candidate that fits, and prints the cost model's error and how far
# the tuner's pick is from the fastest candidate (fails above 5%).
#   bench/tuner_bruteforce.sh [build dir] [extra tuner_bruteforce.py flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
shift || true
binary="$build/bin/megahost"
if [[ ! -f "$root/configs/hardware/local_cpu.toml" ]]; then
  (cd "$root" && "$binary" --calibrate --calibrate_out configs/hardware/local_cpu.toml)
fi
exec python3 "$root/bench/tuner_bruteforce.py" --megahost "$binary" "$@"
