#!/usr/bin/env bash
# megahost_prepare's throughput with the gpt2 tokenizer (shipped vocabulary):
# the shipped corpus repeated to about 18 MB of JSONL, one document per
# paragraph, prepared with 1 and 2 workers (more where the machine has the
# cores: bench/prepare_bench.sh 1 2 4 8). Prints the MB/s line of each run.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/corpus.jsonl" <<'PY'
import json, sys
paragraphs = [p for p in open("data/corpus.txt", encoding="utf-8").read().split("\n\n") if p.strip()]
with open(sys.argv[1], "w", encoding="utf-8") as out:
    for _ in range(10):
        for p in paragraphs:
            out.write(json.dumps({"text": p}) + "\n")
PY
for workers in "${@:-1 2}"; do
  for w in $workers; do
    build/bin/megahost_prepare --input="$work/corpus.jsonl" --tokenizer=gpt2 --workers="$w" \
      --output_prefix="$work/out" 2>/dev/null | head -1
  done
done
