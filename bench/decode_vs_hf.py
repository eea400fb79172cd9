#!/usr/bin/env python3
"""Single-stream greedy decode of the GPT-2 124M shape: Megahost's time per output token
against transformers' generate (PyTorch, KV cache) and against the memory-bandwidth limit,
measured in one run on the same machine.

  $(scripts/python-env) bench/decode_vs_hf.py [--threads 2] [--prompt 64] [--new 64] [--reps 3]

The model: transformers' GPT2LMHeadModel with GPT-2 small's config (12 layers, hidden 768,
12 heads, vocabulary 50257, tied output), seeded random weights, saved with save_pretrained;
Megahost loads that folder directly (checkpoint.load) and decodes with a [generate] section
(temperature 0, stop_at_eod = false so every request runs to max_new_tokens). Both sides get
the same prompt length, the same new tokens and the same threads (Megahost's kernels.threads,
torch.set_num_threads); transformers' generate runs with do_sample=False, its KV cache on and
min_new_tokens = max_new_tokens.

Time per output token (TPOT): Megahost's tpot_s from --metrics_out; for transformers, the time
of generate(new) less generate(1) (the prefill and first token), over new - 1 tokens. Medians
over --reps; each repetition runs both, one after the other.

Megahost runs in fp32 and in bf16 (kernels.dtype = "bf16": bf16 weights and KV cache, f32
accumulation), each against its own limit.

The limit: decoding one token reads every weight once (the positional table: one row) and the
KV cache so far, so TPOT >= bytes per token / memory bandwidth (4 bytes an element in fp32, 2 in
bf16); the bandwidth is a STREAM-like triad (a = b + s c over 256 MiB arrays, the same threads)
measured in the same run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("MEGAHOST", os.path.join(ROOT, "build", "bin", "megahost"))
GPT2_VOCAB = os.path.join(ROOT, "data", "gpt2")
STREAM_FLOATS = 64 << 20  # 256 MiB per array, far past any cache

# generate() asks whether FSDP manages the model, importing torch.distributed.fsdp,
# which Debian's torch 1.13 cannot import under Python 3.11 (a dataclass default
# that 3.11 refuses). Nothing here is distributed.
transformers.generation.utils.is_fsdp_managed_module = lambda module: False


def stream_bandwidth(threads, reps=5):
    """Best-of-reps bytes per second of copy (b = a) and triad (a = b + 3 c)."""
    torch.set_num_threads(threads)
    a, b, c = (torch.ones(STREAM_FLOATS) for _ in range(3))
    best = {"copy": 0.0, "triad": 0.0}
    for _ in range(reps):
        start = time.perf_counter()
        b.copy_(a)
        best["copy"] = max(best["copy"], 2 * 4 * STREAM_FLOATS / (time.perf_counter() - start))
        start = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best["triad"] = max(best["triad"], 3 * 4 * STREAM_FLOATS / (time.perf_counter() - start))
    return best


def make_model(folder):
    torch.manual_seed(1234)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


def prompt_of(length):
    """A text of `length` GPT-2 tokens ("the the the ..."), and its ids."""
    text = "the" + " the" * (length - 1)
    tokenizer = transformers.GPT2TokenizerFast(os.path.join(GPT2_VOCAB, "vocab.json"),
                                               os.path.join(GPT2_VOCAB, "merges.txt"))
    ids = tokenizer(text)["input_ids"]
    assert len(ids) == length, (length, len(ids))
    return text, torch.tensor([ids])


def bytes_per_token(model, prompt, new, element_bytes=4):
    """Weights read per decoded token, plus the KV cache at the middle of the decode."""
    config = model.config
    weights = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel() + config.n_embd
    kv = 2 * config.n_layer * (prompt + new // 2) * config.n_embd
    return element_bytes * (weights + kv)


def hf_tpot(model, ids, new, threads):
    torch.set_num_threads(threads)

    def generate(tokens):
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                                 min_new_tokens=tokens, do_sample=False, use_cache=True,
                                 pad_token_id=model.config.eos_token_id)
        assert out.shape[1] == ids.shape[1] + tokens, out.shape
        return time.perf_counter() - start

    first = generate(1)
    return (generate(new) - first) / (new - 1)


def megahost_tpot(folder, text, prompt, new, threads, work, dtype):
    config = os.path.join(work, "decode.toml")
    with open(config, "w") as f:
        f.write(f"""[data]
tokenizer = "gpt2"
[checkpoint]
load = "{folder}"
[kernels]
threads = {threads}
dtype = "{dtype}"
[comm]
world_size = 1
[generate]
prompt = "{text}"
max_new_tokens = {new}
temperature = 0.0
stop_at_eod = false
""")
    metrics = os.path.join(work, "decode.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    p = subprocess.run([BINARY, "--config", config, "--metrics_out", metrics], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"megahost exited {p.returncode}:\n{p.stderr[-3000:]}")
    with open(metrics) as f:
        request = next(r for r in map(json.loads, f) if "request" in r)
    assert request["new_tokens"] == new and request["prompt_tokens"] == prompt, request
    return request["tpot_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="new tokens per request")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "gpt2_124m")
        model = make_model(folder)
        text, ids = prompt_of(args.prompt)
        ours = {"fp32": [], "bf16": []}
        theirs, triad = [], []
        for _ in range(args.reps):
            for dtype in ours:
                ours[dtype].append(megahost_tpot(folder, text, args.prompt, args.new, args.threads, work, dtype))
            theirs.append(hf_tpot(model, ids, args.new, args.threads))
            triad.append(stream_bandwidth(args.threads)["triad"])
    bandwidth = statistics.median(triad)
    limit = {dtype: bytes_per_token(model, args.prompt, args.new, size) / bandwidth
             for dtype, size in (("fp32", 4), ("bf16", 2))}
    print(f"GPT-2 124M shape, prompt {args.prompt} tokens, {args.new} new, {args.threads} threads, "
          f"median of {args.reps}; torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"bytes per token {limit['fp32'] * bandwidth / 1e6:.1f} MB in fp32, {limit['bf16'] * bandwidth / 1e6:.1f} "
          f"MB in bf16; triad bandwidth {bandwidth / 1e9:.2f} GB/s")
    print(f"{'':28}{'TPOT ms':>10}{'tokens/s':>10}{'x limit':>9}")
    rows = (("Megahost fp32", statistics.median(ours["fp32"]), limit["fp32"]),
            ("Megahost bf16", statistics.median(ours["bf16"]), limit["bf16"]),
            ("transformers generate fp32", statistics.median(theirs), limit["fp32"]),
            ("fp32 bandwidth limit", limit["fp32"], limit["fp32"]), ("bf16 bandwidth limit", limit["bf16"], limit["bf16"]))
    for name, tpot, bound in rows:
        print(f"{name:28}{1e3 * tpot:10.2f}{1 / tpot:10.1f}{tpot / bound:9.2f}")
    print(f"Megahost bf16 is {statistics.median(ours['fp32']) / statistics.median(ours['bf16']):.2f}x its fp32 "
          f"(per repetition: {', '.join(f'{f / b:.2f}' for f, b in zip(ours['fp32'], ours['bf16']))})")


if __name__ == "__main__":
    main()
