#!/usr/bin/env python3
"""Tokens per second of megahost's tokenizers against their references, on one
thread each, on typical text (the shipped corpus, paragraph by paragraph) and
on long single pieces (64 KiB runs of letters, of CJK, of digits):

- gpt2 (GPT-2's shipped vocabulary) against Hugging Face `tokenizers`;
- sentencepiece (a tokenizer.model) against the `sentencepiece` package;
- huggingface on that model's tokenizer.json (Llama 2's layout, as
  transformers converts it) against `tokenizers`.

The SentencePiece model is a BPE with byte fallback trained here on the
corpus (8000 pieces, as Llama 2's settings). Both sides are checked to agree
before being timed.
    $(scripts/python-env) bench/tokenizer_bench.py build/bin/data_interop_tool [REPEATS]
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before tokenizers is imported: one thread
import sentencepiece as spm  # noqa: E402
from tokenizers import ByteLevelBPETokenizer, Tokenizer  # noqa: E402
from transformers import LlamaTokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def ours(tool, kind, texts):
    out = subprocess.run([tool, "encode", *kind], input=json.dumps(texts), capture_output=True,
                         text=True, check=True).stdout
    result = json.loads(out)
    return result["ids"], result["seconds"]


def timed(encode, texts):
    start = time.perf_counter()
    ids = encode(texts)
    return ids, time.perf_counter() - start


def compare(name, peer, tool, kind, fresh_encoder, texts, repeats):
    best_ours = best_theirs = float("inf")
    for _ in range(repeats):
        # A fresh tokenizer each time, so neither side starts with a warm cache.
        their_ids, their_s = timed(fresh_encoder(), texts)
        our_ids, our_s = ours(tool, kind, texts)
        assert our_ids == their_ids, f"{name}: the tokenizers disagree"
        best_ours, best_theirs = min(best_ours, our_s), min(best_theirs, their_s)
    tokens = sum(len(ids) for ids in our_ids)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{name:44s} {tokens:9d} tokens  ours {tokens / best_ours / 1e6:6.2f} M tok/s "
          f"({mb / best_ours:6.1f} MB/s)  {peer} {tokens / best_theirs / 1e6:6.2f} M tok/s  "
          f"time ours/{peer} {best_ours / best_theirs:5.2f}")


def gpt2_encoder():
    t = ByteLevelBPETokenizer(str(ROOT / "data/gpt2/vocab.json"), str(ROOT / "data/gpt2/merges.txt"))
    return lambda texts: [e.ids for e in t.encode_batch(texts)]


def sentencepiece_files(folder, corpus):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus.splitlines()), model_prefix=str(folder / "tokenizer"), vocab_size=8000,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, add_dummy_prefix=True, minloglevel=2)
    converted = LlamaTokenizer.from_pretrained(str(folder), legacy=False)
    converted.backend_tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.model", folder / "tokenizer.json"


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
        compare(f"gpt2: {name}", "tokenizers", tool, ["gpt2"], gpt2_encoder, texts, repeats)
    with tempfile.TemporaryDirectory() as folder:
        model, tokenizer_json = sentencepiece_files(Path(folder), corpus)

        def spm_encoder():
            processor = spm.SentencePieceProcessor(model_file=str(model))
            return lambda texts: processor.encode(texts, num_threads=1)

        def llama2_encoder():
            t = Tokenizer.from_file(str(tokenizer_json))
            return lambda texts: [e.ids for e in t.encode_batch(texts, add_special_tokens=False)]

        for name, texts in cases.items():
            compare(f"sentencepiece: {name}", "sentencepiece", tool, ["sentencepiece", str(model)], spm_encoder,
                    texts, repeats)
        for name, texts in cases.items():
            compare(f"huggingface, llama 2 layout: {name}", "tokenizers", tool, ["huggingface", str(tokenizer_json)],
                    llama2_encoder, texts, repeats)


if __name__ == "__main__":
    main()
