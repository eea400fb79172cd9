#!/bin/sh
# One command for the CPU benchmark against PyTorch (see bench/cpu_vs_torch.py):
#   bench/cpu_vs_torch.sh [--configs tiny,small] [--reps 3] [--out DIR] ...
# Builds build-bench (Release) when its megahost binary is missing, then runs the
# benchmark with the tests' Python environment (scripts/python-env; scripts/install-deps.sh makes it).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build="${MEGAHOST_BENCH_BUILD:-$repo/build-bench}"
python="${MEGAHOST_BENCH_PYTHON:-$("$repo/scripts/python-env")}"

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "$python cannot import torch; run scripts/install-deps.sh, or set MEGAHOST_BENCH_PYTHON" >&2
  exit 2
fi
if [ ! -x "$build/bin/megahost" ] || [ ! -f "$build/bin/plugins/mh_kernels_cpu.so" ] || [ "${MEGAHOST_BENCH_REBUILD:-0}" = 1 ]; then
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j"$(nproc)"
fi
exec "$python" "$repo/bench/cpu_vs_torch.py" --megahost "$build/bin/megahost" "$@"
