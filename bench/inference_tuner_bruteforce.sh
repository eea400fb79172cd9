#!/usr/bin/env bash
# The inference tuner against brute force on this machine: calibrates it
# afresh (`megahost --calibrate quick`, unless --profile names one), tunes
# bench/tuner_small.toml for generation with it, runs every candidate's
# generate config and prints the fidelity table: the cost model's TTFT and
# TPOT median and max errors and how far each goal's pick is from the
# fastest candidate (fails above 5%).
#   bench/inference_tuner_bruteforce.sh [build dir] [extra inference_tuner_bruteforce.py flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shift || true
exec python3 "$root/bench/inference_tuner_bruteforce.py" --megahost "$build/bin/megahost" \
  --out "$build/inference_tuner_bruteforce_out" "$@"
