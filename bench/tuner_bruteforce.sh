#!/usr/bin/env bash
# The tuner against brute force on this machine: calibrates it afresh
# (`megahost --calibrate quick`, unless --profile names one), tunes
# bench/tuner_small.toml with that profile, trains every candidate that fits
# and prints the fidelity table: the cost model's median and max error and
# how far the tuner's pick is from the fastest candidate (fails above 5%).
#   bench/tuner_bruteforce.sh [build dir] [extra tuner_bruteforce.py flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shift || true
exec python3 "$root/bench/tuner_bruteforce.py" --megahost "$build/bin/megahost" --out "$build/tuner_bruteforce_out" "$@"
