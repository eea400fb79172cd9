#!/usr/bin/env bash
# The shipped config (configs/default.toml: TP 2 with SP, PP 2, 4 ranks) on
# 4 thread ranks of one process, then on 4 MPI processes as the README
# launches it, each for STEPS steps; prints the median tokens/s of each
# (the first step, which pays for start-up, left out) and their ratio.
#   bench/mpi_vs_threads.sh [STEPS]
# Measured (2-core Xeon VM, busy with other builds, 10 steps): threads 452
# tokens/s, mpirun -np 4 359 tokens/s (0.79); with each MPI rank taking all
# cores, as before ranks_on_node (kernels.threads=2), 49 tokens/s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MEGAHOST:-$root/build/bin/megahost}
steps=${1:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median_tokens() {
  python3 - "$1" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
print(f"{statistics.median(r['tokens_per_s'] for r in steps[1:]):.0f}")
PY
}

"$bin" --config "$root/configs/default.toml" train.steps="$steps" train.eval_interval=0 \
  --metrics_out "$work/threads.jsonl" > "$work/threads.log" 2>&1
mpirun -np 4 --oversubscribe "$bin" --config "$root/configs/default.toml" comm.plugin=mpi \
  train.steps="$steps" train.eval_interval=0 --metrics_out "$work/mpi.jsonl" > "$work/mpi.log" 2>&1
threads=$(median_tokens "$work/threads.jsonl")
mpi=$(median_tokens "$work/mpi.jsonl")
echo "threads: $threads tokens/s; mpirun -np 4: $mpi tokens/s; mpi/threads = $(python3 -c "print(f'{$mpi / $threads:.2f}')")"
grep -m1 "kernel threads\|threads (OpenBLAS" "$work/mpi.log" || true
