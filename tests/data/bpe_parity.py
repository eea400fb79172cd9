"""Our GPT-2 byte-level BPE against Hugging Face `tokenizers`: train a small
ByteLevel BPE with their library, then check that the C++ tokenizer loading
the same vocab.json/merges.txt encodes tricky strings token for token as they
do and decodes back to the text; finally run megahost_prepare with it and read
the dataset with the independent numpy reader."""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import megatron_format

try:
    from tokenizers import ByteLevelBPETokenizer
except ImportError as error:
    sys.exit(f"{error}: run scripts/install-deps.sh (the tests' Python environment)")

# Text the tokenizer learns its merges from, besides the corpus, so that
# numbers, contractions and non-ASCII get merges of their own.
EXTRA_TRAINING = [
    "I'm sure you're right, we'll see; they've gone and she'd said it's done.",
    "In 1811 there were 3,000 pounds a year, 12.5% of 10000 and 2024-06-01.",
    "café naïve über façade — “quoted” ‘single’ Ελληνικά 東京 🙂🙂",
] * 20

CASES = [
    "Hello world",
    "  leading spaces and trailing   ",
    "multiple\n\nnewlines\n",
    "tabs\tand\r\nwindows line ends\r\n",
    "I'm can't we'll they've she'd you're it's I'M DON'T",
    "'s at the start, and a lone ' quote",
    "Numbers 12345 3.14159 1,000,000 2024-06-01 x2 v1.0",
    "mixed123abc ABC123def",
    "punctuation!!! ??? ... ;-) (a) [b] {c} <d> @#$%^&*",
    "café naïve über façade",
    "Ελληνικά and 東京 and emoji 🙂👍🏽",
    "\u00a0non-breaking\u00a0spaces\u2003and em space",
    "   \n   ",
    " ",
    "a",
    "",
]


def train(corpus, folder):
    text = Path(corpus).read_text(encoding="utf-8")[:200_000]
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator([text, *EXTRA_TRAINING], vocab_size=800, min_frequency=2,
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.save_model(str(folder))
    return tokenizer, text


def run(command, stdin=None):
    result = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{result.stderr}")
    return result.stdout


def check_encodings(tool, folder, tokenizer, cases):
    output = run([tool, "encode", "gpt2", folder / "vocab.json", folder / "merges.txt"],
                 stdin=json.dumps(cases))
    ours = json.loads(output)
    failures = 0
    for text, ids, decoded in zip(cases, ours["ids"], ours["decoded"]):
        theirs = tokenizer.encode(text).ids
        if ids != theirs:
            failures += 1
            print(f"MISMATCH {text[:60]!r}\n  ours:   {ids[:40]}\n  theirs: {theirs[:40]}")
        if decoded != text:
            failures += 1
            print(f"ROUND TRIP {text[:60]!r} decoded as {decoded[:60]!r}")
    if failures:
        sys.exit(f"{failures} of {2 * len(cases)} checks failed")
    print(f"gpt2 BPE: {len(cases)} strings encode as Hugging Face tokenizers does and round-trip")


def check_prepare(prepare, folder, tokenizer, documents):
    jsonl = folder / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"body": d}) + "\n" for d in documents), encoding="utf-8")
    prefix = folder / "docs"
    run([prepare, f"--input={jsonl}", "--json_key=body", "--tokenizer=gpt2",
         f"--vocab_file={folder / 'vocab.json'}", f"--merges_file={folder / 'merges.txt'}",
         f"--output_prefix={prefix}"])
    dtype, got = megatron_format.read(str(prefix))
    eod = tokenizer.token_to_id("<|endoftext|>")
    expected = [[tokenizer.encode(d).ids + [eod]] for d in documents if d]
    assert str(dtype) == "uint16", f"megahost_prepare chose {dtype} for a vocab of 800"
    assert got == expected, "megahost_prepare --tokenizer=gpt2 disagrees with Hugging Face"
    print(f"megahost_prepare --tokenizer=gpt2: {len(expected)} documents as Hugging Face has them")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--prepare", required=True)
    parser.add_argument("--corpus", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        tokenizer, text = train(args.corpus, folder)
        # A long stretch of real prose as well as the tricky strings.
        check_encodings(args.tool, folder, tokenizer, CASES + [text[100_000:130_000]])
        check_prepare(args.prepare, folder, tokenizer, CASES)


if __name__ == "__main__":
    main()
