"""Runs the megahost binary with TOML overrides and reads its metrics back.

Shared by the benchmarks in this folder; every figure they print comes from
the JSON-lines metrics the run writes (--metrics_out).
"""
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("MEGAHOST", os.path.join(ROOT, "build", "bin", "megahost"))
CONFIG = os.path.join(ROOT, "configs", "default.toml")

# The configs of research/baselines.md, single rank unless overridden.
TINY = "model.layers=4 model.hidden=256 model.heads=4 model.seq_len=128 model.vocab=256 " \
       "train.micro_batch=8 train.global_batch=8"
SMALL = "model.layers=12 model.hidden=768 model.heads=12 model.seq_len=256 model.vocab=50304 " \
        "train.micro_batch=4 train.global_batch=4"
SINGLE = "comm.world_size=1 parallel.tensor.size=1 parallel.pipeline.size=1 recompute.plugin=none " \
         "model.dropout=0 model.attention_dropout=0 train.eval_interval=0"


def run(overrides, steps, extra_flags=()):
    """Trains `steps` steps; returns (step records, final memory record)."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [BINARY, "--config", CONFIG, "--metrics_out", metrics, *extra_flags,
               f"train.steps={steps}", *overrides.split()]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        records = [json.loads(line) for line in open(metrics)]
    steps_ = [r for r in records if "loss" in r]
    final = next((r for r in records if r.get("final")), None)
    return steps_, final


def median_of(records, key, skip=1):
    """Median of `key` over the records after the first `skip` (warm-up)."""
    values = [r[key] for r in records[skip:]] or [r[key] for r in records]
    return statistics.median(values)
