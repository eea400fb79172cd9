#!/usr/bin/env bash
# The inference tuner against brute force on this machine: calibrates this
# CPU into build/ once (never over the shipped profile), tunes
# bench/tuner_small.toml for generation with it, runs every candidate's
# generate config and prints the cost model's TTFT and TPOT errors and how
# far each goal's pick is from the fastest candidate (fails above 5%).
#   bench/inference_tuner_bruteforce.sh [build dir] [extra inference_tuner_bruteforce.py flags]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shift || true
binary="$build/bin/megahost"
profile="$build/inference_tuner_profile/local_cpu.toml"
if [[ ! -f "$profile" ]]; then
  mkdir -p "$(dirname "$profile")"
  (cd "$root" && "$binary" --config bench/tuner_small.toml --calibrate --calibrate_out "$profile")
fi
exec python3 "$root/bench/inference_tuner_bruteforce.py" --megahost "$binary" --profile "$profile" "$@"
