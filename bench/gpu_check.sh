#!/usr/bin/env bash
# The GPU check, one command on a machine with one NVIDIA GPU (docs/gpu.md):
#  1. configures against the system's libraries, or, where the system lacks
#     one, against the bundle of Debian packages (scripts/gpu-bundle.sh)
#     unpacked into a private prefix; finds nvcc, cuBLAS and NCCL in the
#     toolkit, the system or the Python wheels' nvidia/* folders;
#  2. builds megahost, its plugins and the GPU tests for the device's
#     architecture (sm_90 on Hopper);
#  3. runs the GPU tests (ctest -R '^gpu\.': descriptors, device, op-by-op
#     parity with the cpu kernels in fp32 and bf16, nccl);
#  4. measures cuBLAS's bf16 and fp32 GEMM peaks;
#  5. dry-runs, then trains a ~350M-parameter GPT (24 layers, hidden 1024,
#     16 heads, seq 1024, vocab 50304) for 30 steps on the cuda kernels with
#     selective recompute;
#  6. writes a short table last: each stage's time and result, tokens/s, MFU
#     against the measured bf16 peak, peak memory against the dry run.
# Without a CUDA device it does everything that needs none (configure,
# build, the tests, which skip, the dry run) and says which stages it skipped.
#
#   bench/gpu_check.sh [OUT]
#
# OUT (else $OUT, else build-gpu-check/out) receives eight files: check.log
# (this transcript), build.log, tests.log, device.jsonl, runs.log (the
# megahost runs), dry.jsonl, train.jsonl and summary.txt.
#
# Environment: GPU_BUNDLE (the bundle's folder, default gpu-bundle),
# GPU_BUILD (the build folder, default build-gpu-check),
# CUDA_ARCH (CMAKE_CUDA_ARCHITECTURES; default the device's compute
# capability, 90 when nvidia-smi sees none), GPU_TESTS (ctest regex,
# '^gpu\.'), GPU_DTYPE (auto, fp32 or bf16: the training run's kernels.dtype;
# auto tries bf16 on a tiny model and falls back to fp32 if that fails),
# STEPS (30), MICRO_BATCH (8), GLOBAL_BATCH (8), JOBS (nproc).
#
# Exit status: 0 every stage ran and passed, 1 a stage or a test failed,
# 3 no CUDA device (the stages that need one were skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(realpath -m "${1:-${OUT:-build-gpu-check/out}}")
build=$(realpath -m "${GPU_BUILD:-$root/build-gpu-check}")
scratch=$build/check  # what the stages hand each other, so that OUT keeps eight files
bundle=$(realpath -m "${GPU_BUNDLE:-$root/gpu-bundle}")
deps=$build/deps
multiarch=$(uname -m)-linux-gnu
mkdir -p "$out" "$scratch"
rm -f "$scratch/stages.tsv" "$out"/{build.log,tests.log,device.jsonl,runs.log,dry.jsonl,train.jsonl,summary.txt}
exec > >(tee "$out/check.log") 2>&1

failed=0
no_device=""
dtype=${GPU_DTYPE:-auto}
stage() {  # stage <name> <function>: runs it; the function may set `result`
  local name=$1 start=$SECONDS status=0
  result=ok
  echo "=== $name"
  "$2" || status=$?
  if ((status != 0)); then
    failed=1
    if [[ $result == ok ]]; then result=FAILED; else result="FAILED: $result"; fi
  fi
  printf '%s\t%d\t%s\n' "$name" $((SECONDS - start)) "$result" >>"$scratch/stages.tsv"
  return $status
}
device_stage() {  # device_stage <name> <function>: a stage that needs the device
  if [[ -n $no_device ]]; then
    echo "=== $1: skipped, $no_device"
    printf '%s\t0\tskipped: no CUDA device\n' "$1" >>"$scratch/stages.tsv"
    return 0
  fi
  stage "$@"
}

# The folders of the Python wheels' nvidia namespace package (nvidia/nccl,
# nvidia/cu13, ...), where pip-installed CUDA libraries live.
wheel_folders() {
  python3 - <<'EOF' 2>/dev/null || true
import importlib.util, pathlib
spec = importlib.util.find_spec("nvidia")
for location in (spec.submodule_search_locations if spec else []):
    for folder in sorted(pathlib.Path(location).iterdir()):
        if folder.is_dir():
            print(folder)
EOF
}

# first <glob> <folder...>: the first file matching glob in the folders.
first() {
  local pattern=$1 folder file
  shift
  for folder in "$@"; do
    for file in "$folder"/$pattern; do
      [[ -e $file ]] && echo "$file" && return 0
    done
  done
  return 1
}

# nvcc, cuBLAS and NCCL as CMake arguments (cmake_args), and include folders
# for every C++ and CUDA compile (includes; the .cu files include
# cublas_v2.h). The libraries are handed to CMake by their full paths: a
# wheel ships only the versioned name (libnccl.so.2), which find_library
# does not take.
find_cuda() {
  local nvcc toolkit wheels places=() libs=() incs=() header library lt
  mapfile -t wheels < <(wheel_folders)
  nvcc=${CUDACXX:-$(command -v nvcc || first bin/nvcc /usr/local/cuda "${wheels[@]}" || true)}
  [[ -x $nvcc ]] || { result="no nvcc: put CUDA's bin folder on PATH or set CUDACXX" && echo "$result" && return 1; }
  toolkit=$(dirname "$(dirname "$(realpath "$nvcc")")")
  places=(${NCCL_HOME:+"$NCCL_HOME"} "$toolkit" "$toolkit/targets/$(uname -m)-linux" /usr /usr/local "${wheels[@]}")
  for p in "${places[@]}"; do
    libs+=("$p/lib64" "$p/lib" "$p/lib/$multiarch")
    incs+=("$p/include")
  done
  cmake_args+=("-DCMAKE_CUDA_COMPILER=$nvcc")
  echo "nvcc: $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*'))"

  header=$(first cublas_v2.h "${incs[@]}") || { result="no cuBLAS (cublas_v2.h)" && echo "$result" && return 1; }
  library=$(first 'libcublas.so*' "${libs[@]}") || { result="no cuBLAS (libcublas.so)" && echo "$result" && return 1; }
  lt=$(first 'libcublasLt.so*' "$(dirname "$library")") || { result="no libcublasLt beside $library" && return 1; }
  echo "cuBLAS: $library"
  [[ $(dirname "$header") == "$toolkit"/* ]] || includes+=("$(dirname "$header")")
  cmake_args+=("-DCUDA_cublas_LIBRARY=$library" "-DCUDA_cublasLt_LIBRARY=$lt")
  if header=$(first nccl.h "${incs[@]}") && library=$(first 'libnccl.so*' "${libs[@]}"); then
    echo "NCCL: $library"
    cmake_args+=("-DNCCL_INCLUDE_DIR=$(dirname "$header")" "-DNCCL_LIBRARY=$library")
  else
    echo "no NCCL (nccl.h and libnccl.so): comm_nccl and its tests are skipped"
  fi
}

# Build for the device's compute capability (sm_90 on Hopper).
cuda_arch() {
  local capability
  capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
  if [[ -n ${CUDA_ARCH:-} ]]; then
    echo "$CUDA_ARCH"
  elif [[ $capability =~ ^[0-9]+\.[0-9]$ ]]; then
    echo "${capability/./}"
  else
    echo 90
  fi
}

# The bundle's packages unpacked into $deps, and what CMake needs to build
# against them: the prefix, its find modules, its multiarch include folder
# (cblas.h; a compiler searches only /usr's by itself), pkg-config reading
# the prefix's .pc files, and an RPATH that also serves the libraries' own
# dependencies (DT_RPATH, not DT_RUNPATH: libopenblas finds libgfortran
# through it).
use_bundle() {
  python3 scripts/unpack_bundle.py "$bundle" "$deps" || {
    result="cannot use the bundle $bundle (see above); write one with scripts/gpu-bundle.sh $bundle on Debian 12"
    return 1
  }
  local lib=$deps/usr/lib/$multiarch
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$deps/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  if ! command -v pkg-config >/dev/null; then
    mkdir -p "$deps/bin"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$deps/usr/bin/pkgconf" >"$deps/bin/pkg-config"
    chmod +x "$deps/bin/pkg-config"
    cmake_args+=("-DPKG_CONFIG_EXECUTABLE=$deps/bin/pkg-config")
  fi
  includes+=("$deps/usr/include/$multiarch")
  # Debian's glog-config.cmake names its find modules' folder by absolute
  # path (/usr/share/glog/cmake); the prefix's copies go on the module path.
  local modules
  modules=$(find "$deps/usr/share" -mindepth 3 -maxdepth 3 -name 'Find*.cmake' -printf '%h\n' | sort -u | paste -sd';')
  cmake_args+=("-DCMAKE_PREFIX_PATH=$deps/usr" "-DCMAKE_MODULE_PATH=$modules" "-DCMAKE_BUILD_RPATH=$lib")
  local kind
  for kind in EXE SHARED MODULE; do
    cmake_args+=("-DCMAKE_${kind}_LINKER_FLAGS=-Wl,--disable-new-dtags")
  done
}

run_cmake() {
  local list
  list=$(IFS=';' && echo "${includes[*]}")
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
    "-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES=$list" "-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES=$list" \
    "${cmake_args[@]}" >>"$out/build.log" 2>&1
}

# The system's libraries first; the bundle where the system lacks one (then
# for all of them, so that one set of versions is used). A build folder made
# with the bundle keeps it.
configure() {
  cmake_args=()
  includes=()
  if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
    result="needs cmake and ninja on PATH" && echo "$result" && return 1
  fi
  find_cuda || return 1
  arch=$(cuda_arch)
  echo "CUDA architecture: $arch"
  if grep -qs "^CMAKE_PREFIX_PATH:.*=$deps/usr$" "$build/CMakeCache.txt"; then
    use_bundle && run_cmake && result="against the bundle" && return 0
    [[ $result != ok ]] || result="cmake failed (see build.log)"
    return 1
  fi
  if run_cmake; then
    result="against the system's libraries"
    return 0
  fi
  echo "the system lacks a library the build needs:"
  grep -m1 -A3 "CMake Error" "$out/build.log" || true
  echo "configuring against the bundle $bundle instead"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  use_bundle && run_cmake && result="against the bundle" && return 0
  [[ $result != ok ]] || result="cmake failed (see build.log)"
  return 1
}

build() {
  grep -E "^-- megahost:" "$out/build.log" || true
  cmake --build "$build" -j"${JOBS:-$(nproc)}" --target host/all plugins/all tests/gpu/all >>"$out/build.log" 2>&1 ||
    { result="see build.log" && tail -30 "$out/build.log" && return 1; }
}

# A failing test is reported, and the check goes on to the training run.
gpu_tests() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null ||
    echo "nvidia-smi: no device listed"
  local status=0
  ctest --test-dir "$build" -R "${GPU_TESTS:-^gpu\.}" --timeout 120 --output-on-failure \
    --output-junit "$scratch/tests.xml" >"$out/tests.log" 2>&1 || status=$?
  result=$(python3 - "$scratch/tests.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
counts = {"passed": 0, "failed": 0, "skipped": 0}
for case in cases:
    status = case.get("status", "run")
    if case.find("failure") is not None or status == "fail":
        counts["failed"] += 1
    elif case.find("skipped") is not None or status in ("notrun", "disabled"):
        counts["skipped"] += 1
    else:
        counts["passed"] += 1
print(", ".join(f"{n} {k}" for k, n in counts.items()))
EOF
  ) || result="no test results (see tests.log)"
  echo "gpu tests: $result"
  grep -E "(Failed|Not Run|\*\*\*)" "$out/tests.log" | head -40 || true
  return $status
}

peaks() {
  local dtype
  for dtype in bf16 fp32; do
    if ! "$build/bin/gpu_device_info" "$dtype" >>"$out/device.jsonl" 2>"$scratch/device.err"; then
      cat "$scratch/device.err"
      if grep -q "^no CUDA device" "$scratch/device.err"; then
        no_device=$(head -1 "$scratch/device.err")
        result="skipped: $no_device"
        rm -f "$out/device.jsonl"
        return 0
      fi
      result="gpu_device_info $dtype failed"
      return 1
    fi
  done
  cat "$out/device.jsonl"
}

write_config() {
  cat >"$scratch/gpt350m.toml" <<EOF
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

# megahost <title> <arguments...>: one run of the configuration, its log
# appended to runs.log, stopped after RUN_TIMEOUT seconds (300).
megahost() {
  local title=$1
  shift
  echo "=== $title: megahost ${*}" >>"$out/runs.log"
  timeout "${RUN_TIMEOUT:-300}" "$build/bin/megahost" --config "$scratch/gpt350m.toml" "$@" >>"$out/runs.log" 2>&1
}

# The engine's mixed precision was tested on the CPU only; a tiny bf16 run
# first tells whether it works on this device.
choose_dtype() {
  if [[ $dtype == auto ]]; then
    if megahost "bf16 probe" kernels.plugin=cuda kernels.dtype=bf16 kernels.peak_tflops=1.0 model.layers=1 \
      model.hidden=64 model.heads=1 model.seq_len=32 train.steps=1 train.global_batch=1 train.micro_batch=1; then
      dtype=bf16
    else
      dtype=fp32
      echo "a tiny bf16 run failed on this device (see runs.log); training in fp32"
    fi
  fi
  result="training in $dtype"
  echo "$result"
}

# Without a device to probe, auto means the cuda kernels' default, bf16.
run_settings() { echo recompute.plugin=selective kernels.plugin=cuda "kernels.dtype=${dtype/auto/bf16}"; }

dry_run() {
  # shellcheck disable=SC2046
  megahost "dry run" --dry_run $(run_settings) --metrics_out "$out/dry.jsonl" ||
    { result="see runs.log" && return 1; }
}

train() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 \
    >"$scratch/memory_used_mib.txt" 2>/dev/null &
  local sampler=$! status=0
  # shellcheck disable=SC2046
  megahost training $(run_settings) --metrics_out "$out/train.jsonl" --report_memory || status=$?
  kill "$sampler" 2>/dev/null || true
  sed -n '/^=== training/,$p' "$out/runs.log" | grep -E "step|memory|rror" | tail -20 || true
  grep -qs '"final"' "$out/train.jsonl" || { result="exit status $status; see runs.log" && return 1; }
}

summary() {
  python3 - "$out" "$scratch" "${dtype/auto/bf16}" "$no_device" <<'EOF' | tee "$out/summary.txt"
import json, pathlib, re, statistics, sys
out, scratch, dtype, no_device = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
def records(name):
    path = out / name
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []
def final_memory(name):
    return next((r["memory"][0] for r in records(name) if r.get("final")), None)
rows = []
devices = {r["dtype"]: r for r in records("device.jsonl")}
if devices:
    bf16, fp32 = devices["bf16"], devices["fp32"]
    rows.append(("device", f"{bf16['name']}, {bf16['memory_bytes'] / 2**30:.0f} GiB"))
    rows.append(("GEMM peak (cuBLAS)",
                 f"bf16 {bf16['peak_flops'] / 1e12:.1f} TFLOP/s, fp32 {fp32['peak_flops'] / 1e12:.1f}"))
elif no_device:
    rows.append(("device", no_device))
steps = [r for r in records("train.jsonl") if "tokens_per_s" in r]
if steps:
    timed = steps[5:] or steps  # the first steps pay for cuBLAS heuristics and the caches
    median = lambda key: statistics.median(r.get(key, r["tflops"]) for r in timed)
    peak = devices["bf16"]["peak_flops"]
    rows.append(("training", f"{dtype}, {len(steps)} steps, loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}"))
    first = len(steps) - len(timed) + 1
    rows.append(("tokens/s", f"{median('tokens_per_s'):.0f} (median of steps {first}-{len(steps)})"))
    mfu, hfu = (100 * median(key) * 1e12 / peak for key in ("tflops", "hw_tflops"))
    rows.append(("MFU / HFU", f"{mfu:.1f}% / {hfu:.1f}%"
                 f" of the measured bf16 peak ({median('tflops'):.1f} model TFLOP/s)"))
dry, real = final_memory("dry.jsonl"), final_memory("train.jsonl")
mib = lambda b: f"{b / 2**20:.0f} MiB"
if dry and real:
    diff = real["total"] - dry["total"]
    verdict = "equal" if diff == 0 else f"differs by {diff / 2**20:+.0f} MiB"
    rows.append(("peak memory (tracked)", f"{mib(real['total'])}; dry run {mib(dry['total'])} ({verdict})"))
    for category in ("params", "grads", "optimizer", "activations", "workspace"):
        rows.append((f"  {category}", f"{mib(real[category])} real, {mib(dry[category])} dry"))
elif dry:
    rows.append(("peak memory, dry run", f"{mib(dry['total'])} per rank ({dtype})"))
runs = (out / "runs.log").read_text() if (out / "runs.log").exists() else ""
held = re.findall(r"device memory held at most (\d+) MiB", runs)
if held:
    rows.append(("held by the allocator", f"{held[-1]} MiB"))
used = scratch / "memory_used_mib.txt"
used = [int(v) for v in used.read_text().split() if v.isdigit()] if used.exists() else []
if used:
    rows.append(("nvidia-smi memory.used", f"{max(used)} MiB at most (context and cuBLAS included)"))
stages = [line.split("\t") for line in (scratch / "stages.tsv").read_text().splitlines()]
width = max(len(name) for name, _, _ in stages)
print(f"{'stage':{width}}  seconds  result")
for name, seconds, result in stages:
    print(f"{name:{width}}  {int(seconds):7d}  {result}")
print(f"{'total':{width}}  {sum(int(s) for _, s, _ in stages):7d}")
print()
width = max(len(name) for name, _ in rows) if rows else 0
for name, value in rows:
    print(f"{name:{width}}  {value}")
EOF
}

write_config
if ! stage configure configure || ! stage build build; then
  summary
  exit 1
fi
stage "gpu tests" gpu_tests || true
stage "GEMM peaks" peaks || true
device_stage "bf16 probe" choose_dtype || true
stage "dry run" dry_run || true
device_stage training train || true
echo "=== summary (also in $out/summary.txt)"
summary
if ((failed)); then
  exit 1
fi
[[ -z $no_device ]] || exit 3
