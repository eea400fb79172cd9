"""megahost's `gpt2` tokenizer with GPT-2's real, shipped vocabulary against
Hugging Face `tokenizers` loading the same vocab.json and merges.txt, on an
adversarial corpus:

- the pre-tokenizer's pieces for every code point (all 1,112,064 that are not
  surrogates), each after a letter, a digit, punctuation, whitespace and
  before a contraction, so that a code point in the wrong class (letter,
  number, whitespace, other) changes the pieces;
- token ids for the same text, for long runs (64 KiB of letters, digits,
  spaces, punctuation, CJK of Unicode 15), every whitespace character in
  runs, contractions after letters new in Unicode 15-16, and a real text;
- text that is not UTF-8 is refused, naming the byte.
"""
import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

try:
    from tokenizers import ByteLevelBPETokenizer, pre_tokenizers
except ImportError as error:
    sys.exit(f"{error}: run scripts/install-deps.sh (the tests' Python environment)")

# After a letter, a digit, punctuation and whitespace: a code point joins the
# piece before it exactly when it is of that class.
CONTEXTS = ("a{}", "1{}", "!{}", "\t{}")
WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u180e\u2000\u2007\u200a\u200b\u2028" \
             "\u2029\u202f\u205f\u3000\ufeff"
NEW_LETTERS = "\U00031350\U000323af\U0002ebf0\U0002ee5d\U00013460\U000143fa\U0001e5d0"


def every_code_point_texts(contexts, block=8192):
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for start in range(0, len(code_points), block):
        chars = (chr(cp) for cp in code_points[start:start + block])
        yield "".join(context.format(c) for c in chars for context in contexts)


def adversarial_texts(corpus):
    rng = random.Random(19)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    yield "".join(rng.choice(letters) for _ in range(65536))
    yield "".join(rng.choice("0123456789") for _ in range(65536))
    yield " " * 65536 + "x"
    yield "".join(rng.choice("!?.,;:-()[]{}'\"") for _ in range(65536))
    yield "".join(chr(rng.randrange(0x31350, 0x323B0)) for _ in range(20000))
    yield "".join(rng.choice(WHITESPACE) for _ in range(5000)) + "end"
    for ws in WHITESPACE:
        yield f"a{ws}b{ws}{ws}c {ws}d{ws} e{ws}{ws}"
    for c in NEW_LETTERS:
        yield f"{c}'s {c}'t {c}'re {c}'ve {c}'m {c}'ll {c}'d {c}{c}1{c}!"
    yield "I'm can't we'll they've she'd you're it's I'M DON'T 'S ''s"
    yield corpus[:200_000]


def run(command, stdin):
    result = subprocess.run(command, input=stdin, capture_output=True)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def ours(tool, command, texts):
    rc, out, err = run([tool, *command], json.dumps(texts).encode())
    if rc != 0:
        sys.exit(f"{tool} {' '.join(command)} failed:\n{err}")
    return json.loads(out)


def check_pieces(tool, texts):
    pretokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    got = ours(tool, ["pretokenize"], texts)["pieces"]
    for text, pieces in zip(texts, got):
        theirs = [text[start:end] for _, (start, end) in pretokenizer.pre_tokenize_str(text)]
        if pieces != theirs:
            first = next(i for i, (a, b) in enumerate(zip(pieces + [None], theirs + [None])) if a != b)
            sys.exit(f"pre-tokenizer differs at piece {first}: ours "
                     f"{[hex(ord(c)) for c in (pieces + [''])[first]]}, theirs "
                     f"{[hex(ord(c)) for c in (theirs + [''])[first]]}")


def check_ids(tool, vocab_dir, tokenizer, texts):
    got = ours(tool, ["encode", "gpt2"], texts)  # no files: the shipped ones
    encodings = tokenizer.encode_batch(texts)
    for text, ids, decoded, encoding in zip(texts, got["ids"], got["decoded"], encodings):
        theirs = encoding.ids
        if ids != theirs:
            first = next(i for i, (a, b) in enumerate(zip(ids + [None], theirs + [None])) if a != b)
            sys.exit(f"ids differ at token {first} of {text[:40]!r}: ours {ids[first:first + 5]}, "
                     f"theirs {theirs[first:first + 5]}")
        if decoded != text:
            sys.exit(f"{text[:40]!r} decodes as {decoded[:40]!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--vocab_dir", required=True)
    parser.add_argument("--corpus", required=True)
    args = parser.parse_args()
    vocab_dir = Path(args.vocab_dir)
    tokenizer = ByteLevelBPETokenizer(str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"))
    check_pieces(args.tool, list(every_code_point_texts(CONTEXTS)))
    print(f"pre-tokenizer: all 1,112,064 code points cut as tokenizers cuts them")
    adversarial = list(adversarial_texts(Path(args.corpus).read_text(encoding="utf-8")))
    check_pieces(args.tool, adversarial)
    # Ids of every code point once, after a space and before a contraction.
    texts = list(every_code_point_texts((" {}'s",))) + adversarial
    check_ids(args.tool, vocab_dir, tokenizer, texts)
    print(f"gpt2 with the shipped vocabulary: {len(texts)} adversarial texts encode as tokenizers "
          "encodes them and round-trip")


if __name__ == "__main__":
    main()
