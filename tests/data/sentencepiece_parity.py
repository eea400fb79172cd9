"""SentencePiece models, checked against the libraries that define them, on a
BPE model with byte fallback trained here as Llama 2's was (identity
normalization, spaces kept, digits split, a dummy prefix):

- data.tokenizer = "sentencepiece" on the tokenizer.model against the
  `sentencepiece` package;
- data.tokenizer = "huggingface" on the tokenizer.json transformers converts
  it to (LlamaTokenizer: a Metaspace pre-tokenizer, prepend_scheme "first",
  no split) and on the other layouts of such files (Llama 2's normalizer
  without a pre-tokenizer; Metaspace with prepend_scheme "always", and with
  split) against Hugging Face `tokenizers` on the same file.

Each encodes every code point, an adversarial corpus (spaces, special tokens
inside text, empty text) and real text (the shipped corpus and docs/) token
for token, and decodes alike. Decoding every prefix of a text's ids, as a
server streaming a completion does, gives the library's text for that
prefix (incomplete byte-fallback characters included).
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import sentencepiece as spm
    from tokenizers import Tokenizer
    from transformers import LlamaTokenizer
except ImportError as error:
    sys.exit(f"{error}: run scripts/install-deps.sh (the tests' Python environment)")

META = "\u2581"


def train(folder, corpus):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus.splitlines()), model_prefix=str(folder / "tokenizer"), vocab_size=2000,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, add_dummy_prefix=True, character_coverage=0.9995,
        user_defined_symbols=["<|im_start|>"], minloglevel=2)
    return folder / "tokenizer.model"


def layouts(folder):
    """The tokenizer.json layouts of SentencePiece BPE models, each a JSON object."""
    converted = LlamaTokenizer.from_pretrained(str(folder), legacy=False, add_bos_token=False)
    first = json.loads(converted.backend_tokenizer.to_str())
    assert first["pre_tokenizer"]["type"] == "Metaspace", first["pre_tokenizer"]
    always = json.loads(json.dumps(first))
    always["pre_tokenizer"]["prepend_scheme"] = "always"
    split = json.loads(json.dumps(first))
    split["pre_tokenizer"]["split"] = True
    llama2 = json.loads(json.dumps(first))
    llama2["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": META}, {"type": "Replace", "pattern": {"String": " "}, "content": META}]}
    llama2["pre_tokenizer"] = None
    return {"metaspace first (transformers' LlamaTokenizer)": first, "metaspace always": always,
            "metaspace always, split": split, "llama 2 normalizer": llama2}


def every_code_point():
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    for start in range(0, len(code_points), 16384):
        yield "".join(f" {chr(cp)}'S1{chr(cp)}" for cp in code_points[start:start + 16384])


def texts(real):
    rng = random.Random(19)
    yield "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(65536))
    yield "".join(rng.choice("0123456789") for _ in range(4099))
    yield "  two leading spaces, trailing ones  "
    yield " \n\t\u3000 \u2028x  \n\n  y\r\r\n"
    yield f"{META}already{META} {META}{META}meta"
    yield "hello</s>world <s>x</s> <unk> y<|im_start|>z"
    yield "</s> after a special token"
    yield "<0x41> is text, not a byte"
    yield "\U0001F600 emoji, 中文, \u00e9\u0301 and \U00031350"
    yield ""
    yield from real


def run(tool, args, payload):
    result = subprocess.run([tool, *args], input=json.dumps(payload), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args[:2])}: the tool failed:\n{result.stderr}")
    return json.loads(result.stdout)


def first_difference(ours, theirs):
    return next(i for i, (a, b) in enumerate(zip(ours + [None], theirs + [None])) if a != b)


def check(tool, name, kind, path, cases, encode, decode):
    ours = run(tool, ["encode", kind, str(path)], cases)
    for text, ids, decoded in zip(cases, ours["ids"], ours["decoded"]):
        theirs = encode(text)
        if ids != theirs:
            at = first_difference(ids, theirs)
            sys.exit(f"{name}: ids differ at token {at} of {text[:50]!r}: ours {ids[max(0, at - 2):at + 5]}, "
                     f"theirs {theirs[max(0, at - 2):at + 5]}")
        if decoded != decode(ids):
            sys.exit(f"{name}: {text[:40]!r} decodes as {decoded[:60]!r}, the library: {decode(ids)[:60]!r}")
    # Every prefix of a few texts' ids, as a stream shows them.
    prefixes = [ids[:k] for ids in ours["ids"][-12:-1] for k in range(min(len(ids), 300) + 1)]
    streamed = run(tool, ["decode", kind, str(path)], prefixes)["decoded"]
    for ids, text in zip(prefixes, streamed):
        if text != decode(ids):
            sys.exit(f"{name}: the ids {ids[-4:]} (a prefix) decode as {text[-20:]!r}, the library: "
                     f"{decode(ids)[-20:]!r}")
    print(f"{name}: {len(cases)} texts encode and decode as the library does; {len(prefixes)} prefixes decode alike")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--docs", required=True)
    args = parser.parse_args()
    corpus = Path(args.corpus).read_text(encoding="utf-8")
    real = [corpus[:200_000]] + [p.read_text(encoding="utf-8") for p in sorted(Path(args.docs).glob("*.md"))]
    cases = list(texts(real)) + list(every_code_point())
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        model = train(folder, corpus)
        processor = spm.SentencePieceProcessor(model_file=str(model))
        check(args.tool, "sentencepiece", "sentencepiece", model, cases,
              lambda text: processor.encode(text), lambda ids: processor.decode(ids))
        for layout, content in layouts(folder).items():
            path = folder / "tokenizer.json"
            path.write_text(json.dumps(content), encoding="utf-8")
            reference = Tokenizer.from_file(str(path))
            check(args.tool, layout, "huggingface", path, cases,
                  lambda text: reference.encode(text, add_special_tokens=False).ids,
                  lambda ids: reference.decode(ids, skip_special_tokens=False))


if __name__ == "__main__":
    main()
