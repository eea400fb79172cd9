#!/usr/bin/env python3
"""Tokens per second of megahost's gpt2 tokenizer (GPT-2's shipped vocabulary)
against Hugging Face `tokenizers` on one thread, on typical text (the shipped
corpus, paragraph by paragraph) and on long single pieces (64 KiB runs of
letters, of CJK, of digits). Both are checked to agree before being timed.
    $(scripts/python-env) bench/tokenizer_bench.py build/bin/data_interop_tool [REPEATS]
"""
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before tokenizers is imported: one thread
from tokenizers import ByteLevelBPETokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def ours(tool, texts):
    out = subprocess.run([tool, "encode", "gpt2"], input=json.dumps(texts), capture_output=True,
                         text=True, check=True).stdout
    result = json.loads(out)
    return result["ids"], result["seconds"]


def theirs(tokenizer, texts):
    start = time.perf_counter()
    encodings = tokenizer.encode_batch(texts)
    return [e.ids for e in encodings], time.perf_counter() - start


def compare(name, tool, texts, repeats):
    best_ours = best_theirs = float("inf")
    for _ in range(repeats):
        # A fresh tokenizer each time, so neither side starts with a warm cache.
        fresh = ByteLevelBPETokenizer(str(ROOT / "data/gpt2/vocab.json"), str(ROOT / "data/gpt2/merges.txt"))
        their_ids, their_s = theirs(fresh, texts)
        our_ids, our_s = ours(tool, texts)
        assert our_ids == their_ids, f"{name}: the tokenizers disagree"
        best_ours, best_theirs = min(best_ours, our_s), min(best_theirs, their_s)
    tokens = sum(len(ids) for ids in our_ids)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{name:28s} {tokens:9d} tokens  ours {tokens / best_ours / 1e6:6.2f} M tok/s "
          f"({mb / best_ours:6.1f} MB/s)  tokenizers {tokens / best_theirs / 1e6:6.2f} M tok/s  "
          f"time ours/tokenizers {best_ours / best_theirs:5.2f}")


def main():
    tool = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rng = random.Random(19)
    corpus = (ROOT / "data/corpus.txt").read_text(encoding="utf-8")
    paragraphs = [p for p in corpus.split("\n\n") if p.strip()]
    cases = {
        "typical text (corpus.txt)": paragraphs,
        "64 KiB of random letters": ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(65536))],
        "64 KiB of one letter": ["a" * 65536],
        "64 KiB of CJK (Ext. H)": ["".join(chr(rng.randrange(0x31350, 0x323B0)) for _ in range(16384))],
        "64 KiB of digits": ["".join(rng.choice("0123456789") for _ in range(65536))],
    }
    for name, texts in cases.items():
        compare(name, tool, texts, repeats)


if __name__ == "__main__":
    main()
