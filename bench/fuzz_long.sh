#!/usr/bin/env bash
# Every fuzz target for 10 minutes (or SECONDS), one after another; see
# scripts/fuzz.sh for where inputs and findings go.
#   bench/fuzz_long.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
exec scripts/fuzz.sh "$seconds" "$@"
