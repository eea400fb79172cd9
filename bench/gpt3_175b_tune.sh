#!/usr/bin/env bash
# Times the tuning of GPT-3 175B for 128 DGX A100 nodes (bench/gpt3_175b_tune.toml)
# and dry-runs the tuned.toml it writes, unchanged.
#   bench/gpt3_175b_tune.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MEGAHOST:-$root/build/bin/megahost}
out=${1:-$(mktemp -d)}
start=$(date +%s.%N)
"$bin" --config "$root/bench/gpt3_175b_tune.toml" output.dir="$out" > "$out.tune.log" 2>&1
end=$(date +%s.%N)
sed -n '/^best:/,$p' "$out.tune.log"
echo "tuning took $(python3 -c "print(f'{$end - $start:.1f}')") s"
"$bin" --config "$out/tuned.toml" --dry_run > "$out.dry.log" 2>&1 && echo "tuned.toml dry-runs unchanged: ok" ||
  { echo "tuned.toml dry run failed:"; tail -5 "$out.dry.log"; exit 1; }
