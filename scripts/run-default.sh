#!/usr/bin/env bash
# README command 1: install what is missing, build, and train the embedded
# default model on the shipped corpus. Metrics go to build/default-metrics.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --no-python
scripts/build.sh
build/bin/megahost --metrics_out build/default-metrics.jsonl "$@"
