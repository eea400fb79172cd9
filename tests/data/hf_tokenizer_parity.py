"""megahost's `huggingface` tokenizer against Hugging Face `tokenizers` on the
same tokenizer.json files, built here with `tokenizers` from GPT-2's shipped
vocabulary in the two layouts current models use:

- GPT-2's: a ByteLevel pre-tokenizer with its own regex (with and without
  add_prefix_space);
- Llama 3's: a Split by Llama 3's regex, then ByteLevel without a regex, with
  ignore_merges and added special tokens beyond the model's vocabulary.

Each encodes an adversarial corpus (long runs, whitespace, special tokens
inside text, case-folded contractions, and with Llama 3's pattern every code
point) token for token as `tokenizers` does (without the post-processor's
template) and decodes alike.
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
except ImportError as error:
    sys.exit(f"{error}: run scripts/install-deps.sh (the tests' Python environment)")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"]


def gpt2_layout(vocab_dir, add_prefix_space):
    model = models.BPE.from_file(str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"))
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer


def llama3_layout(vocab_dir):
    model = models.BPE.from_file(str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"),
                                 ignore_merges=True)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIALS)
    return tokenizer


def every_code_point():
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for start in range(0, len(code_points), 16384):
        yield "".join(f" {chr(cp)}'S1{chr(cp)}" for cp in code_points[start:start + 16384])


def texts(corpus):
    rng = random.Random(19)
    yield "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(65536))
    yield "".join(rng.choice("0123456789") for _ in range(4099))
    yield "\r\n \n\t\u3000 \u2028x  \n\n  y\r\r\n"
    yield "hello<|end_of_text|>world <|begin_of_text|><|reserved_special_token_0|>x<|endoftext|>"
    yield "<|end_of_text|"
    yield "I'M DON'T We'Ll \U00031350'S \U0002ebf0'VE"
    yield ""
    yield corpus[:100_000]


def check(tool, path, tokenizer, cases, name):
    result = subprocess.run([tool, "encode", "huggingface", str(path)], input=json.dumps(cases),
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{name}: the tool failed:\n{result.stderr}")
    ours = json.loads(result.stdout)
    for text, ids, decoded, theirs in zip(cases, ours["ids"], ours["decoded"],
                                          tokenizer.encode_batch(cases, add_special_tokens=False)):
        if ids != theirs.ids:
            first = next(i for i, (a, b) in enumerate(zip(ids + [None], theirs.ids + [None])) if a != b)
            sys.exit(f"{name}: ids differ at token {first} of {text[:50]!r}: ours "
                     f"{ids[first:first + 5]}, theirs {theirs.ids[first:first + 5]}")
        expected = tokenizer.decode(ids, skip_special_tokens=False)
        if decoded != expected:
            sys.exit(f"{name}: {text[:40]!r} decodes as {decoded[:40]!r}, tokenizers: {expected[:40]!r}")
    print(f"{name}: {len(cases)} texts encode and decode as tokenizers does")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--vocab_dir", required=True)
    parser.add_argument("--corpus", required=True)
    args = parser.parse_args()
    vocab_dir = Path(args.vocab_dir)
    cases = list(texts(Path(args.corpus).read_text(encoding="utf-8")))
    # GPT-2's pattern meets every code point in data.gpt2_vocab_matches_huggingface;
    # Llama 3's meets them here.
    layouts = {"gpt2 layout": (gpt2_layout(vocab_dir, False), cases),
               "gpt2 layout, add_prefix_space": (gpt2_layout(vocab_dir, True), cases),
               "llama3 layout": (llama3_layout(vocab_dir), list(every_code_point()) + cases)}
    with tempfile.TemporaryDirectory() as folder:
        for name, (tokenizer, layout_cases) in layouts.items():
            path = Path(folder) / "tokenizer.json"
            tokenizer.save(str(path))
            check(args.tool, path, tokenizer, layout_cases, name)


if __name__ == "__main__":
    main()
