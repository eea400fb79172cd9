#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs
# each one for SECONDS (default 20) from its seed corpus, fuzz/corpus/<target>.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# New inputs go to build-fuzz/corpus/<target>, crashing ones to
# build-fuzz/findings/<target>/. Exits non-zero when any target found one.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(config overrides gpt2_tokenizer tokenizer_json sentencepiece_model indexed_dataset plugin_descriptor
  checkpoint_metadata slice_cover safetensors_header checkpoint_rank_file hf_config shard_index prompts_jsonl sft_jsonl chat_template openai_request
  token_range_sidecar checkpoint_owner)

CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
  -DMEGAHOST_SANITIZE=address,undefined -DMEGAHOST_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build build-fuzz -j2 --target megahost_fuzzers

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One target per core at a time: each runs single-threaded, so CI's fuzz stage
# takes SECONDS x targets / cores.
jobs=${MEGAHOST_JOBS:-$(nproc)}

fuzz_one() {  # fuzz_one <target>: exit status non-zero when it found an input
  local target=$1 work=build-fuzz/corpus/$1 findings=build-fuzz/findings/$1 dict=()
  mkdir -p "$work" "$findings"
  [[ $target == config || $target == overrides ]] && dict=(-dict=fuzz/config.dict)
  # -timeout: an input that takes over 10 s is a finding (a hang), as is
  # using over 2 GiB. -max_len: inputs up to 128 KiB, past the seeds' sizes
  # (libFuzzer's default cap), so deeply nested TOML and JSON are reached.
  build-fuzz/bin/fuzz_"$target" "$work" fuzz/corpus/"$target" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len=131072 -print_final_stats=1 -artifact_prefix="$findings/" \
    >"build-fuzz/fuzz-$target.log" 2>&1
}

report() {  # report <target> <status>
  local log=build-fuzz/fuzz-$1.log
  echo "fuzzed $1 for ${seconds}s (log: $log)"
  if (($2)); then grep -E "ERROR|runtime error|Test unit written" "$log" | head -5 || true; fi
  grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | tail -1 || true
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
}

declare -A running=()  # pid -> target
failed=()
reap() {  # waits for one running target and reports it
  local pid status=0
  wait -n -p pid "${!running[@]}" || status=$?
  report "${running[$pid]}" "$status"
  ((status)) && failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for target in "${targets[@]}"; do
  ((${#running[@]} < jobs)) || reap
  fuzz_one "$target" &
  running[$!]=$target
done
while ((${#running[@]})); do reap; done
if ((${#failed[@]})); then
  echo "fuzzing found crashes in: ${failed[*]} (inputs in build-fuzz/findings/)" >&2
  exit 1
fi
