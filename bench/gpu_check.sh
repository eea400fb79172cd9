#!/usr/bin/env bash
# The GPU check, one command on a machine with one NVIDIA GPU (docs/gpu.md):
#  1. builds megahost with the cuda kernels and nccl plugins;
#  2. runs the GPU tests (descriptors, device, op-by-op parity with the cpu
#     kernels in fp32 and bf16, nccl on every device up to four);
#  3. measures cuBLAS's bf16 (and fp32) GEMM peak;
#  4. trains a ~350M-parameter GPT (24 layers, hidden 1024, 16 heads,
#     seq 1024, vocab 50304) for 30 steps on the cuda kernels with selective
#     recompute, after a dry run of the same configuration;
#  5. prints tokens/s, MFU against the measured bf16 peak, and peak memory
#     against the dry run's prediction.
# Everything goes to one folder: the argument, else $OUT, else
# build-gpu-check/out.
#
#   bench/gpu_check.sh [OUT]
#
# Environment: CUDA_ARCH (CMAKE_CUDA_ARCHITECTURES, default native; e.g. 90),
# GPU_DTYPE (auto, fp32 or bf16: the training run's kernels.dtype; auto tries
# bf16 on a tiny model and falls back to fp32 if that fails),
# STEPS (30), MICRO_BATCH (8), GLOBAL_BATCH (8), JOBS (nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(realpath -m "${1:-${OUT:-build-gpu-check/out}}")
build=$root/build-gpu-check
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1

timings=()
stage() {  # stage <name> <command...>
  local name=$1 start=$SECONDS
  shift
  echo "=== $name"
  "$@"
  timings+=("$(printf '%-26s %4ds' "$name" $((SECONDS - start)))")
}

build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-native}" \
    >"$out/configure.log"
  grep -E "megahost:|CUDA" "$out/configure.log" || true
  cmake --build "$build" -j"${JOBS:-$(nproc)}" >"$out/build.log"
}

# A failing test is reported, and the check goes on to the training run.
gpu_tests() {
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
  if "$build/bin/gpu_test" --gtest_output="json:$out/gpu_test.json" >"$out/gpu_test.log" 2>&1; then
    tests_status="passed"
  else
    tests_status="FAILED (see gpu_test.log)"
  fi
  grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$out/gpu_test.log" | sort | uniq -c | sort -rn | head -40
  echo "gpu tests: $tests_status"
}

peaks() {
  "$build/bin/gpu_device_info" bf16 | tee "$out/device_bf16.json"
  "$build/bin/gpu_device_info" fp32 | tee "$out/device_fp32.json"
}

# The configuration; recompute and kernels are chosen on the command line.
write_config() {
  cat >"$out/gpt350m.toml" <<EOF
[model]
layers = 24
hidden = 1024
heads = 16
seq_len = 1024
vocab = 50304

[train]
steps = ${STEPS:-30}
global_batch = ${GLOBAL_BATCH:-8}
micro_batch = ${MICRO_BATCH:-8}
eval_interval = 0
log_interval = 5

[data]
path = "$root/data/corpus_byte"
tokenizer = "byte"
EOF
}

megahost() { "$build/bin/megahost" --config "$out/gpt350m.toml" "$@"; }

# The engine's mixed precision was tested on the CPU only; a tiny bf16 run
# first tells whether it works on this device.
choose_dtype() {
  dtype=${GPU_DTYPE:-auto}
  if [[ $dtype == auto ]]; then
    if megahost kernels.plugin=cuda kernels.dtype=bf16 kernels.peak_tflops=1.0 model.layers=1 model.hidden=64 \
      model.heads=1 model.seq_len=32 train.steps=1 train.global_batch=1 train.micro_batch=1 >"$out/bf16_probe.log" 2>&1; then
      dtype=bf16
    else
      dtype=fp32
      echo "a tiny bf16 run failed on this device (see bf16_probe.log); training in fp32"
    fi
  fi
  echo "training dtype: $dtype"
}

train() {
  local run=(recompute.plugin=selective kernels.plugin=cuda "kernels.dtype=$dtype")
  megahost --dry_run "${run[@]}" --metrics_out "$out/dry.jsonl" >"$out/dry.log" 2>&1
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$out/memory_used_mib.txt" 2>/dev/null &
  local sampler=$!
  megahost "${run[@]}" --metrics_out "$out/train.jsonl" --report_memory 2>&1 | tee "$out/train.log" |
    grep -E "step|memory|rank|error|ERROR" || true
  kill "$sampler" 2>/dev/null || true
  grep -q '"final"' "$out/train.jsonl" || { echo "training failed; see $out/train.log" && return 1; }
}

summary() {
  python3 - "$out" "$dtype" <<'EOF' | tee "$out/summary.txt"
import json, pathlib, re, statistics, sys
out, dtype = pathlib.Path(sys.argv[1]), sys.argv[2]
lines = lambda name: [json.loads(l) for l in (out / name).read_text().splitlines() if l.strip()]
steps = [r for r in lines("train.jsonl") if "tokens_per_s" in r]
timed = steps[5:] or steps  # the first steps pay for cuBLAS heuristics and the caches
peak_bf16 = json.loads((out / "device_bf16.json").read_text())["peak_flops"]
peak_fp32 = json.loads((out / "device_fp32.json").read_text())["peak_flops"]
tokens = statistics.median(r["tokens_per_s"] for r in timed)
tflops = statistics.median(r["tflops"] for r in timed)
hw_tflops = statistics.median(r.get("hw_tflops", r["tflops"]) for r in timed)
final = lambda name: next(r for r in lines(name) if r.get("final"))["memory"][0]
dry, real = final("dry.jsonl"), final("train.jsonl")
held = re.findall(r"device memory held at most (\d+) MiB", (out / "train.log").read_text())
used = [int(v) for v in (out / "memory_used_mib.txt").read_text().split() if v.isdigit()] if (out / "memory_used_mib.txt").exists() else []
mib = lambda b: b / 2**20
print(f"device: {json.loads((out / 'device_bf16.json').read_text())['name']}")
print(f"measured GEMM peak: bf16 {peak_bf16 / 1e12:.1f} TFLOP/s, fp32 {peak_fp32 / 1e12:.1f} TFLOP/s")
print(f"training: {dtype}, {len(steps)} steps, median of steps {len(steps) - len(timed) + 1}-{len(steps)}; "
      f"loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}")
print(f"tokens/s: {tokens:.0f}; model TFLOP/s: {tflops:.1f}; hardware TFLOP/s (recompute included): {hw_tflops:.1f}")
print(f"MFU against the measured bf16 peak: {100 * tflops * 1e12 / peak_bf16:.1f}%"
      f" (against the {dtype} peak: {100 * tflops * 1e12 / (peak_bf16 if dtype == 'bf16' else peak_fp32):.1f}%);"
      f" HFU {100 * hw_tflops * 1e12 / peak_bf16:.1f}%")
diff = real["total"] - dry["total"]
verdict = "equal" if diff == 0 else f"differs by {mib(diff):+.0f} MiB"
print(f"peak memory, engine-tracked: {mib(real['total']):.0f} MiB; the dry run predicted {mib(dry['total']):.0f} MiB"
      f" ({verdict})")
for category in ("params", "grads", "optimizer", "activations", "workspace"):
    print(f"  {category:12s} {mib(real[category]):9.0f} MiB real, {mib(dry[category]):9.0f} MiB dry")
if held:
    print(f"device memory held by the cuda kernels' caching allocator at most: {held[-1]} MiB")
if used:
    print(f"nvidia-smi memory.used at most: {max(used)} MiB (CUDA context, cuBLAS workspace and cache included)")
EOF
}

stage "build (CUDA_ARCH=${CUDA_ARCH:-native})" build
stage "gpu tests" gpu_tests
stage "GEMM peaks" peaks
write_config
stage "bf16 probe" choose_dtype
stage "dry run + training" train
stage "summary" summary
echo "gpu tests: $tests_status"
printf '%s\n' "stage times:" "${timings[@]}" "total                      ${SECONDS}s" "output: $out"
