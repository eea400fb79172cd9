"""Supervised fine-tuning data and its masked loss against PyTorch (docs/finetune.md).

Prepare: `megahost_prepare --format=sft` on prompt/completion, input/output and
chat lines writes the tokens and, beside them, the loss mask
(PREFIX_loss_mask, uint8, one per token): checked item by item against what
the lines say (the byte tokenizer makes tokens the text's bytes; the chat's
ChatML rendering is spelled out here, the renderer itself is checked against
apply_chat_template in tests/serve/chat_template_test.py), and a chat through
a model's tokenizer.json against transformers' encoding of
apply_chat_template. With a SentencePiece model (a small BPE with byte
fallback, Llama 2's settings, trained here) prompt/completion lines and a
chat give transformers' ids for the whole text (LlamaTokenizer's conversion),
through the tokenizer.model and through two tokenizer.json layouts of it,
each token trained on when its offsets reach into a completion or an
assistant piece (tokens straddling a boundary included). Bad lines and a
mask that disagrees with its tokens are refused naming the file, line and key.

Loss: a Llama made by transformers (seeded, no download) is trained by
Megahost for one step on prompt/completion documents whose prompts differ in
length, with the whole dataset as the global batch, so the batch is every
window whatever the order. Transformers' loss on the same windows with
labels = -100 where the mask is 0 (the mean over the trained targets) and
its gradients equal Megahost's on one rank, on TP 2 x PP 2 and on DP 2 (whose
replicas count different numbers of targets) within TOLERANCE; --evaluate's
loss too. data.eod_mask_loss on plain documents equals transformers with
labels = -100 where the input is the EOD, evaluated on DP 2 over an odd
number of micro-batches (one replica runs one more than the other).

Needs torch, transformers and tokenizers; exits 77 (skipped) without them."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
try:
    import numpy as np
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    import sentencepiece as spm
    from transformers import LlamaTokenizer, PreTrainedTokenizerFast
    from transformers_interop import (SEQ, llama, make, read_checkpoint, read_grads, relative, metrics_loss,
                                      evaluation, variant_keys)
except ImportError as e:
    print(f"skipped: {e}; scripts/install-deps.sh installs torch and transformers")
    sys.exit(77)

# fp32 on both sides, the sums in another order: as transformers_interop.py.
TOLERANCE = 1e-4
EOD = 256  # the byte tokenizer's
DOCS = 9   # of SEQ tokens each: 8 windows, the global batch

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def run(*args, expect=0):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != expect:
        sys.exit(f"{' '.join(map(str, args))}\nexited {p.returncode} (expected {expect}):\n{p.stdout}\n{p.stderr}")
    return p


def read_dataset(prefix):
    """The sequences of a Megatron indexed dataset, read with numpy alone."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    code = idx[17]
    count = int(np.frombuffer(idx, np.uint64, 1, 18)[0])
    lengths = np.frombuffer(idx, np.int32, count, 34)
    pointers = np.frombuffer(idx, np.int64, count, 34 + 4 * count)
    dtype = {1: np.uint8, 4: np.int32, 8: np.uint16}[code]
    data = np.fromfile(prefix + ".bin", dtype=np.uint8)
    return [list(np.frombuffer(data, dtype, n, p)) for n, p in zip(lengths, pointers)]


def prepare(tools, tmp, name, lines, *flags, expect=0):
    source = os.path.join(tmp, f"{name}.jsonl")
    with open(source, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    prefix = os.path.join(tmp, name)
    p = run(tools.prepare, "--input", source, "--output_prefix", prefix, "--format", "sft", *flags, expect=expect)
    return prefix, p.stdout + p.stderr


def check_prepare(tools, tmp):
    def expect(*segments):  # (text, trained) pairs, then the EOD, trained on
        tokens, mask = [], []
        for text, trained in segments:
            tokens += list(text.encode())
            mask += [int(trained)] * len(text.encode())
        return tokens + [EOD], mask + [1]

    template = os.path.join(tmp, "chatml.jinja")
    with open(template, "w") as f:
        f.write(CHATML)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": "Bye!"}]
    lines = [json.dumps({"prompt": "Q: 2+2? A:", "completion": " 4"}),
             json.dumps({"input": "Say hi:", "output": " hi"}),
             json.dumps({"messages": chat})]
    prefix, _ = prepare(tools, tmp, "mixed", lines, "--chat_template", template)
    want = [expect(("Q: 2+2? A:", False), (" 4", True)),
            expect(("Say hi:", False), (" hi", True)),
            expect(("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                    False), ("Hello.<|im_end|>\n", True), ("<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
                                                            False), ("Bye!<|im_end|>\n", True))]
    assert read_dataset(prefix) == [t for t, _ in want], read_dataset(prefix)
    assert read_dataset(prefix + "_loss_mask") == [m for _, m in want], read_dataset(prefix + "_loss_mask")
    print("prepare: prompt/completion, input/output and chat lines give the expected tokens and masks")

    bad = {'{"prompt": "x"}': "key 'completion' is missing",
           '{"prompt": 3, "completion": "x"}': "key 'prompt' is number, not a string",
           '{"messages": [{"role": "user", "content": "x"}]}': "holds no assistant message",
           '{"messages": [{"role": "assistant"}]}': "key 'messages[0].content' must be a string",
           '{"text": "x"}': "none of the keys 'messages', 'prompt' and 'completion'",
           '[1]': "not a JSON object"}
    for line, message in bad.items():
        _, out = prepare(tools, tmp, "bad", [lines[0], line], "--chat_template", template, expect=1)
        assert "bad.jsonl:2: " in out and message in out, (line, out)
    _, out = prepare(tools, tmp, "nochat", [lines[2]], expect=1)
    assert "nochat.jsonl:1: key 'messages' needs the model's chat template" in out, out
    print(f"prepare: {len(bad) + 1} bad lines refused naming the file, line and key")


def check_prepare_with_a_model_tokenizer(tools, tmp):
    """A chat tokenized by a byte-level BPE tokenizer.json (GPT-2's shipped
    vocabulary in Llama 3's layout, ChatML's markers as added tokens), its
    template found in the tokenizer_config.json beside it: the tokens are
    transformers' encoding of apply_chat_template's text, and the mask is 1
    exactly on the tokens inside the assistant messages' pieces (located by
    the tokenizer's own offsets)."""
    shipped = os.path.join(os.path.dirname(__file__), "..", "..", "data", "gpt2")
    model = models.BPE.from_file(os.path.join(shipped, "vocab.json"), os.path.join(shipped, "merges.txt"),
                                 ignore_merges=True)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                                   r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                             behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    folder = os.path.join(tmp, "chatml_model")
    os.makedirs(folder)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>"}, f)
    chat = [{"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": "What's the capital of France?"},
            {"role": "assistant", "content": " Paris, of course."},
            {"role": "user", "content": "And of Italy?\n"},
            {"role": "assistant", "content": "Rome"}]
    # A prompt ending in a space: " Paris" is one pre-token, which straddles
    # the boundary and is trained on (tokenized apart: " " and "Paris").
    pair = ("Answer: ", "Paris")
    lines = [json.dumps({"messages": chat}), json.dumps({"prompt": pair[0], "completion": pair[1]})]
    prefix, _ = prepare(tools, tmp, "chatml", lines, "--tokenizer", "huggingface", "--tokenizer_file",
                        os.path.join(folder, "tokenizer.json"))
    hf = PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    hf.chat_template = CHATML
    text = hf.apply_chat_template(chat, tokenize=False)
    encoding = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = []
    for m in chat:
        if m["role"] == "assistant":
            piece = m["content"] + "<|im_end|>\n"
            start = text.index("<|im_start|>assistant\n" + piece) + len("<|im_start|>assistant\n")
            spans.append((start, start + len(piece)))
    mask = [int(any(a <= s and e <= b for a, b in spans)) for s, e in encoding["offset_mapping"]]
    eod = tokenizer.token_to_id("<|endoftext|>")
    assert read_dataset(prefix)[0] == encoding["input_ids"] + [eod], (read_dataset(prefix), encoding["input_ids"])
    assert read_dataset(prefix + "_loss_mask")[0] == mask + [1], (read_dataset(prefix + "_loss_mask"), mask)
    whole = hf("".join(pair), add_special_tokens=False, return_offsets_mapping=True)
    straddling = [int(e > len(pair[0])) for _, e in whole["offset_mapping"]]
    assert hf.convert_ids_to_tokens(whole["input_ids"])[-1] == "\u0120Paris", whole
    assert read_dataset(prefix)[1] == whole["input_ids"] + [eod], (read_dataset(prefix)[1], whole)
    assert read_dataset(prefix + "_loss_mask")[1] == straddling + [1], (read_dataset(prefix + "_loss_mask")[1], whole)
    print(f"prepare: a chat through a tokenizer.json ({len(mask) + 1} tokens, {sum(mask) + 1} trained) equals "
          "transformers' encoding of apply_chat_template, masked on the assistant turns; a token straddling a "
          "prompt's end is trained on")


def check_prepare_with_a_sentencepiece_model(tools, tmp):
    """Tokens of the whole text, as transformers gives them: per segment each
    would begin with its own dummy prefix "▁"; masks by offsets."""
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus.txt")
    folder = os.path.join(tmp, "spm_model")
    os.makedirs(folder)
    with open(corpus, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=os.path.join(folder, "tokenizer"), vocab_size=1000,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, add_dummy_prefix=True, character_coverage=0.9995,
        minloglevel=2)
    hf = LlamaTokenizer.from_pretrained(folder, legacy=False, add_bos_token=False)
    hf.chat_template = CHATML
    template = os.path.join(tmp, "spm_chatml.jinja")
    with open(template, "w") as f:
        f.write(CHATML)
    # Per line: a plain boundary, a prompt ending in a space (its "▁" joins
    # the completion's first letter: "▁P" straddles), a word cut by the
    # boundary ("▁there" straddles), a completion beginning with a
    # byte-fallback character, digits split one by one.
    pairs = [("Question: what is the capital of France?\nAnswer:", " Paris"),
             ("Answer: ", "Paris, of course."),
             ("It is the", "re."),
             ("The quick brown fox jum", "ped over the lazy dog."),
             ("Write a clef:", "\U0001d11e and a note \u266a."),
             ("Count: 1", "234 5")]
    chat = [{"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": "What's the capital of France?"},
            {"role": "assistant", "content": "Paris, of course."},
            {"role": "user", "content": "And of Italy?\n"},
            {"role": "assistant", "content": " Rome"}]
    lines = [json.dumps({"prompt": p, "completion": c}) for p, c in pairs] + [json.dumps({"messages": chat})]
    prefix, _ = prepare(tools, tmp, "spm", lines, "--tokenizer", "sentencepiece", "--tokenizer_file",
                        os.path.join(folder, "tokenizer.model"), "--chat_template", template)

    def expect(text, spans):  # transformers' ids, 1 where a token's offsets reach into a span
        encoding = hf(text, add_special_tokens=False, return_offsets_mapping=True)
        mask = [int(any(s < b and e > a for a, b in spans)) for s, e in encoding["offset_mapping"]]
        return encoding["input_ids"] + [hf.eos_token_id], mask + [1]

    want = [expect(p + c, [(len(p), len(p + c))]) for p, c in pairs]
    text = hf.apply_chat_template(chat, tokenize=False)
    ids = hf.apply_chat_template(chat, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    spans = []
    for m in chat:
        if m["role"] == "assistant":
            piece = m["content"] + "<|im_end|>\n"
            start = text.index("<|im_start|>assistant\n" + piece) + len("<|im_start|>assistant\n")
            spans.append((start, start + len(piece)))
    want.append(expect(text, spans))
    assert want[-1][0][:-1] == list(ids), (want[-1][0], ids)
    # The same model as a tokenizer.json: transformers' conversion (Metaspace
    # pre-tokenizer) and Llama 2's own layout (Prepend + Replace normalizer).
    converted = json.loads(hf.backend_tokenizer.to_str())
    llama2 = json.loads(json.dumps(converted))
    llama2["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    llama2["pre_tokenizer"] = None
    prefixes = [("sentencepiece", prefix)]
    for name, layout in (("converted", converted), ("llama2", llama2)):
        path = os.path.join(folder, f"{name}.json")
        with open(path, "w") as f:
            json.dump(layout, f)
        prefixes.append((name, prepare(tools, tmp, f"spm_{name}", lines, "--tokenizer", "huggingface",
                                       "--tokenizer_file", path, "--chat_template", template)[0]))
    for name, prefix in prefixes:
        got, masks = read_dataset(prefix), read_dataset(prefix + "_loss_mask")
        for i, ((tokens, mask), line) in enumerate(zip(want, lines)):
            assert got[i] == tokens, (name, line, got[i], tokens, hf.convert_ids_to_tokens(tokens))
            assert masks[i] == mask, (name, line, masks[i], mask, hf.convert_ids_to_tokens(tokens))
    # What tokenizing prompt and completion apart gives with the library
    # (transformers' Metaspace adds no "▁" before " Paris", the library does).
    library = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    separate = [library.encode(p) + library.encode(c) for p, c in pairs]
    same = [p for s, (t, _), p in zip(separate, want, pairs) if s == t[:-1]]
    assert not same, f"per-segment tokenization should differ from the whole text on every line: {same}"
    print(f"prepare: {len(pairs)} prompt/completion lines and a chat through a SentencePiece model (tokenizer.model, "
          "and two tokenizer.json layouts) equal transformers' ids of the whole text, masked by offsets "
          "(per-segment ids differ on every line)")


def sft_documents(tools, tmp):
    """DOCS prompt/completion documents of SEQ tokens each, prompts of
    different lengths: window w is document w and the first token of the
    next (a prompt token, not trained on)."""
    docs = []
    for d in range(DOCS):
        prompt = "".join(chr(ord("a") + (d * 5 + i) % 26) for i in range(3 + 3 * d))
        completion = "".join(chr(ord("A") + (d + 7 * i) % 26) for i in range(SEQ - 1 - len(prompt)))
        docs.append((prompt, completion))
    prefix, _ = prepare(tools, tmp, "sft", [json.dumps({"prompt": p, "completion": c}) for p, c in docs])
    stream, mask = [], []
    for p, c in docs:
        stream += list((p + c).encode()) + [EOD]
        mask += [0] * len(p) + [1] * len(c) + [1]
    windows = [stream[w * SEQ:w * SEQ + SEQ + 1] for w in range(DOCS - 1)]
    labels = [[t if m else -100 for t, m in zip(stream[w * SEQ + 1:w * SEQ + SEQ + 1], mask[w * SEQ + 1:w * SEQ + SEQ + 1])]
              for w in range(DOCS - 1)]
    return prefix, torch.tensor(windows)[:, :SEQ], torch.tensor(labels)


def write_config(tmp, name, data, load):
    path = os.path.join(tmp, f"{name}.toml")
    with open(path, "w") as f:
        f.write(f"""[train]
steps = 1
global_batch = {DOCS - 1}
micro_batch = 2
lr = 1e-2
warmup_steps = 0
eval_interval = 0
[data]
path = "{data}"
split = "100,0,0"
[checkpoint]
load = "{load}"
[kernels]
threads = 1
""")
    return path


def check_loss(tools, tmp):
    data, inputs, labels = sft_documents(tools, tmp)
    model = make(llama, torch.float32)
    hf = os.path.join(tmp, "llama_hf")
    model.save_pretrained(hf, safe_serialization=True)
    logits = model(inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(grads[k])
    grads_hf, grads_ckpt = os.path.join(tmp, "grads_hf"), os.path.join(tmp, "grads_ckpt")
    model.save_pretrained(grads_hf, safe_serialization=True)
    run(tools.convert, "--input", grads_hf, "--output", grads_ckpt)
    want = read_checkpoint(grads_ckpt)
    trained = int((labels != -100).sum())
    print(f"transformers: masked loss {loss.item():.6f} over {trained} of {labels.numel()} targets")
    config = write_config(tmp, "sft", data, hf)
    for layout, stages, keys in (("one rank", 1, []),
                                 ("TP 2 x PP 2", 2, ["comm.world_size=4", "parallel.tensor.size=2",
                                                     "parallel.pipeline.size=2"]),
                                 ("DP 2", 1, ["comm.world_size=2"])):
        metrics, dump = os.path.join(tmp, f"sft_{stages}_{len(keys)}.jsonl"), os.path.join(tmp, f"sft_{len(keys)}.grads")
        run(tools.megahost, "--config", config, *keys, "--metrics_out", metrics, "--grads_out", dump)
        got = {}  # each pipeline stage dumps its own parameters
        for stage in range(stages):
            got.update(read_grads(dump + (f".stage{stage}" if stages > 1 else "")))
        assert got.keys() == want.keys(), set(got) ^ set(want)
        worst = max((relative(got[k], want[k].reshape(-1)), k) for k in got)
        error = abs(metrics_loss(metrics, 1) - loss.item()) / loss.item()
        print(f"{layout}: loss relative error {error:.1e}; {len(got)} gradients, worst relative error "
              f"{worst[0]:.1e} ({worst[1]})")
        assert error <= TOLERANCE and worst[0] <= TOLERANCE, (layout, error, worst)
    metrics = os.path.join(tmp, "sft_evaluate.jsonl")
    run(tools.megahost, "--config", config, "--evaluate", 'data.split="0,1,0"', "--metrics_out", metrics)
    valid = evaluation(metrics)["valid"]
    error = abs(valid["loss"] - loss.item()) / loss.item()
    print(f"--evaluate: loss {valid['loss']:.6f}, relative error {error:.1e}")
    assert error <= TOLERANCE, valid

    # A mask that is not this dataset's is refused before step 1.
    other, _ = prepare(tools, tmp, "other", [json.dumps({"prompt": "a", "completion": "b"})])
    for ext in (".bin", ".idx"):
        os.replace(other + "_loss_mask" + ext, data + "_loss_mask" + ext)
    out = run(tools.megahost, "--config", config, expect=1)
    text = out.stdout + out.stderr
    assert "sft_loss_mask.idx: 1 sequences, but" in text and "megahost_prepare --format=sft" in text, text
    print("a loss mask whose sizes disagree with its tokens is refused, naming both")


def check_eod_mask_loss(tools, tmp):
    """data.eod_mask_loss on plain documents (no mask file): transformers with
    labels = -100 where the input is the EOD (Megatron's --eod-mask-loss)."""
    text = "".join(chr(ord("a") + (i * 11) % 26) for i in range(DOCS * SEQ - 1))
    cuts = [0, 5, 40, 41, 90, 150, 151, 200, len(text)]  # documents of 5, 35, 1, ... bytes
    source = os.path.join(tmp, "plain.jsonl")
    with open(source, "w") as f:
        f.writelines(json.dumps({"text": text[a:b]}) + "\n" for a, b in zip(cuts, cuts[1:]))
    data = os.path.join(tmp, "plain")
    run(tools.prepare, "--input", source, "--output_prefix", data)
    stream = []
    for a, b in zip(cuts, cuts[1:]):
        stream += list(text[a:b].encode()) + [EOD]
    windows = torch.tensor([stream[w * SEQ:w * SEQ + SEQ + 1] for w in range((len(stream) - 1) // SEQ)])
    inputs, labels = windows[:, :SEQ], windows[:, 1:].clone()
    labels[inputs == EOD] = -100
    model = make(llama, torch.float32)
    hf = os.path.join(tmp, "llama_eod_hf")
    model.save_pretrained(hf, safe_serialization=True)
    with torch.no_grad():
        logits = model(inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).item()
    config = write_config(tmp, "eod", data, hf)
    metrics = os.path.join(tmp, "eod_evaluate.jsonl")
    run(tools.megahost, "--config", config, "--evaluate", 'data.split="0,1,0"', "data.eod_mask_loss=true",
        "comm.world_size=2", "--metrics_out", metrics)
    valid = evaluation(metrics)["valid"]
    error = abs(valid["loss"] - loss) / loss
    print(f"eod_mask_loss: --evaluate on DP 2: loss {valid['loss']:.6f} over {int((labels != -100).sum())} of "
          f"{labels.numel()} targets, relative error {error:.1e}")
    assert error <= TOLERANCE, (valid, loss)


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare"):
        ap.add_argument(f"--{tool}", required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        check_prepare(tools, tmp)
        check_prepare_with_a_model_tokenizer(tools, tmp)
        check_prepare_with_a_sentencepiece_model(tools, tmp)
        check_loss(tools, tmp)
        check_eod_mask_loss(tools, tmp)


if __name__ == "__main__":
    main()
