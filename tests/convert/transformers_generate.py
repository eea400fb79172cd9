"""Megahost's greedy generation against transformers' own (docs/generate.md).

Random small GPT-2 and Llama models (grouped-query attention, untied and tied output) made by
transformers (the makers of transformers_interop.py), saved with save_pretrained; megahost with
checkpoint.load = that folder and a [generate] section (temperature 0, fp32, a few prompts
served two at a time, on one rank and on two tensor-parallel ranks) must give exactly the token
ids of transformers' model.generate(do_sample=False) with its KV cache. The ids are compared
through the metrics file's per-request "tokens".

Needs torch and transformers (scripts/install-deps.sh); exits 77 (skipped) without them."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transformers_interop  # noqa: E402  (exits 77 without torch)
from transformers_interop import MODELS, SEQ, make, run  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402

# generate() asks whether FSDP manages the model, importing torch.distributed.fsdp,
# which Debian's torch 1.13 cannot import under Python 3.11 (a dataclass default
# that 3.11 refuses). Nothing here is distributed.
transformers.generation.utils.is_fsdp_managed_module = lambda module: False

# Byte-tokenizer prompts (a character is a token); the longest plus NEW stays within SEQ.
PROMPTS = ["Hello", "The quick brown", "a", "0123456789", "zz top"]
NEW = 12
BYTE_IDS = 257  # the byte tokenizer's: 256 bytes and the end of document
# Generation serves the model's whole vocabulary, so the model has the tokenizer's.
transformers_interop.VOCAB = BYTE_IDS
LAYOUTS = {"one rank": [], "tp 2": ["comm.world_size=2", "parallel.tensor.size=2"]}


def write_config(tmp, name, hf):
    prompts = os.path.join(tmp, "prompts.jsonl")
    with open(prompts, "w") as f:
        for p in PROMPTS:
            f.write(json.dumps({"prompt": p}) + "\n")
    path = os.path.join(tmp, f"{name}_generate.toml")
    with open(path, "w") as f:
        f.write(f"""[checkpoint]
load = "{hf}"
[kernels]
threads = 1
dtype = "fp32"
[generate]
prompts_file = "{prompts}"
max_new_tokens = {NEW}
temperature = 0.0
batch = 2
stop_at_eod = false
""")
    return path


def megahost_ids(tools, config, layout, metrics):
    run(tools.megahost, "--config", config, *layout, "--metrics_out", metrics)
    with open(metrics) as f:
        records = sorted((r for r in map(json.loads, f) if "request" in r), key=lambda r: r["request"])
    return [r["tokens"] for r in records]


def transformers_ids(model, prompt):
    ids = torch.tensor([list(prompt.encode())])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


def check(tools, tmp, name, maker):
    model = make(maker, torch.float32)
    model.generation_config.eos_token_id = None  # as stop_at_eod = false: every request runs NEW tokens
    hf = os.path.join(tmp, f"{name}_hf")
    model.save_pretrained(hf, safe_serialization=True)
    want = [transformers_ids(model, p) for p in PROMPTS]
    assert all(len(w) == NEW for w in want), want
    config = write_config(tmp, name, hf)
    for layout_name, layout in LAYOUTS.items():
        got = megahost_ids(tools, config, layout, os.path.join(tmp, f"{name}_{len(layout)}.jsonl"))
        for prompt, g, w in zip(PROMPTS, got, want):
            assert g == w, f"{name}, {layout_name}, prompt {prompt!r}:\n  megahost     {g}\n  transformers {w}"
        assert len(got) == len(PROMPTS), got
        print(f"{name}, {layout_name}: {len(PROMPTS)} prompts x {NEW} greedy tokens, the same ids as transformers")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megahost", required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    assert max(len(p) for p in PROMPTS) + NEW <= SEQ
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, maker, _ in MODELS:
            check(tools, tmp, name, maker)


if __name__ == "__main__":
    main()
