"""Megahost against transformers' own GPT-2 and Llama (docs/convert.md).

Round trip, for each model and dtype: a randomly initialised model made by
transformers (config + seeded init, no download), saved with save_pretrained,
converted to a Megahost checkpoint (which megahost_ckpt verifies) and back;
transformers' from_pretrained loads the result and every tensor is equal.

Parity, for each model the engine computes: the imported model trained by
Megahost on a dataset whose every sample is one known sequence, against
PyTorch on that sequence: the loss and every gradient (fp32, relative error
<= 1e-4); `megahost --evaluate` on the folder itself gives that loss over
the whole split; then a few steps of training, an export, and transformers'
loss on the exported model equal to Megahost's on the same weights.

Needs torch and transformers (scripts/install-deps.sh); exits 77 (skipped)
without them."""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipped: {e}; scripts/install-deps.sh installs torch and transformers")
    sys.exit(77)

TOLERANCE = 1e-4
SEQ = 32          # tokens per sample: the models' positions, one document with its end-of-document token
VOCAB = 384       # the byte tokenizer's 257 ids, a multiple of 128 so Megahost pads nothing


def gpt2(dtype):
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=SEQ, vocab_size=VOCAB,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config).to(dtype)


def llama(dtype, tied=False):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=SEQ, tie_word_embeddings=tied,
                                      rope_theta=500000.0)  # not the class default: the base must be read
    return transformers.LlamaForCausalLM(config).to(dtype)


def qwen2(dtype):
    """Llama with biases on q, k and v alone (model.qkv_bias)."""
    config = transformers.Qwen2Config(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=SEQ, tie_word_embeddings=False,
                                      rope_theta=1000000.0, use_sliding_window=False)
    model = transformers.Qwen2ForCausalLM(config)
    with torch.no_grad():  # transformers starts biases at zero: give them values to check
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.1)
    return model.to(dtype)


# name, model maker, whether Megahost's engine computes it (the parity half).
MODELS = [
    ("gpt2", gpt2, True),
    ("llama", llama, True),
    ("llama_tied", lambda dtype: llama(dtype, tied=True), True),
    ("qwen2", qwen2, True),
]


def run(*args, expect=0):
    # errors="replace": generated text need not be UTF-8 (transformers_generate.py).
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace")
    if p.returncode != expect:
        sys.exit(f"{' '.join(map(str, args))}\nexited {p.returncode} (expected {expect}):\n{p.stdout}\n{p.stderr}")
    return p


def make(maker, dtype, seed=1234):
    torch.manual_seed(seed)
    return maker(dtype).eval()


def round_trip(tools, tmp, name, maker, dtype):
    model = make(maker, dtype)
    hf, ckpt, back = (os.path.join(tmp, f"{name}_{dtype}_{s}") for s in ("hf", "ckpt", "back"))
    model.save_pretrained(hf, safe_serialization=True)
    run(tools.convert, "--input", hf, "--output", ckpt)
    run(tools.ckpt, "info", ckpt)
    flags = ["--dtype", "bf16" if dtype == torch.bfloat16 else "f32", "--max_shard_size", "40KB"]
    run(tools.convert, "--input", ckpt, "--output", back, *flags)
    assert os.path.exists(os.path.join(back, "model.safetensors.index.json")), "40KB shards expected"
    loaded = type(model).from_pretrained(back, dtype="auto")
    want, got = model.state_dict(), loaded.state_dict()
    assert want.keys() == got.keys(), set(want) ^ set(got)
    for key in want:
        assert want[key].dtype == got[key].dtype and torch.equal(want[key], got[key]), f"{name} {dtype}: {key} differs"
    print(f"{name} {dtype}: {len(want)} tensors through Megahost and back, equal; from_pretrained loads it")


def prepare_dataset(tools, tmp):
    """Every document is the same SEQ - 1 bytes (plus its end-of-document
    token), so every sample Megahost draws is the same SEQ + 1 tokens: the
    64 documents' 64 SEQ tokens make 63 samples."""
    text = "".join(chr(ord("a") + (i * 7) % 26) for i in range(SEQ - 1))
    source = os.path.join(tmp, "docs.jsonl")
    with open(source, "w") as f:
        for _ in range(64):
            f.write(json.dumps({"text": text}) + "\n")
    prefix = os.path.join(tmp, "repeated")
    run(tools.prepare, "--input", source, "--output_prefix", prefix, "--tokenizer", "byte")
    tokens = list(text.encode()) + [256] + [ord(text[0])]
    return prefix, torch.tensor([tokens])


def variant_keys(config):
    """[model] overrides that give a Megahost checkpoint of this model the run's model."""
    if config.model_type != "llama":
        return []
    return ["model.arch=llama", f"model.kv_heads={config.num_key_value_heads}",
            f"model.ffn_hidden={config.intermediate_size}", f"model.layernorm_eps={config.rms_norm_eps}",
            f"model.tie_embeddings={str(config.tie_word_embeddings).lower()}"]


def write_config(tmp, name, data, load, steps, extra=""):
    path = os.path.join(tmp, f"{name}.toml")
    with open(path, "w") as f:
        f.write(f"""[train]
steps = {steps}
global_batch = 2
micro_batch = 2
lr = 1e-2
min_lr = 1e-2
warmup_steps = 0
eval_interval = 0
[data]
path = "{data}"
split = "100,0,0"
[checkpoint]
load = "{load}"
{extra}
[kernels]
threads = 1
""")
    return path


def read_grads(path):
    grads = {}
    with open(path, "rb") as f:
        while header := f.read(4):
            name = f.read(struct.unpack("<I", header)[0]).decode()
            n = struct.unpack("<Q", f.read(8))[0]
            grads[name] = np.frombuffer(f.read(4 * n), dtype=np.float32)
    return grads


def read_checkpoint(path):
    """The global tensors of a checkpoint Megahost wrote, assembled from its slices."""
    with open(os.path.join(path, "metadata.json")) as f:
        meta = json.load(f)
    files = {name: load_file(os.path.join(path, name)) for name in meta["files"]}
    out = {}
    for name, entry in meta["tensors"].items():
        full = np.zeros(entry["shape"], dtype=np.float32)
        for s in entry["slices"]:
            r, c = s["offset"]
            part = files[s["file"]][s["key"]]
            full[r:r + part.shape[0], c:c + part.shape[1]] = part
        out[name] = full
    return out


def loss_of(model, tokens):
    logits = model(tokens[:, :SEQ]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def relative(a, b):
    return float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1e-30)


def metrics_loss(path, step):
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("step") == step and "loss" in record:
                return record["loss"]
    sys.exit(f"{path}: no loss for step {step}")


def evaluation(path):
    """The --evaluate records of a metrics file, by split."""
    with open(path) as f:
        return {r["evaluate"]: r for r in map(json.loads, f) if "evaluate" in r}


def check_evaluate(tools, tmp, name, data, hf, loss):
    """--evaluate on the Hugging Face folder: every sample is the known
    sequence, so the whole split's mean loss is transformers' loss on it."""
    config = write_config(tmp, f"{name}_evaluate", data, hf, steps=1)
    metrics = os.path.join(tmp, f"{name}_evaluate.jsonl")
    run(tools.megahost, "--config", config, "--evaluate", 'data.split="0,1,0"', "--metrics_out", metrics)
    valid = evaluation(metrics)["valid"]
    error = abs(valid["loss"] - loss) / loss
    print(f"{name}: --evaluate on the folder: loss {valid['loss']:.6f} over {valid['tokens']} tokens, "
          f"relative error {error:.1e}")
    assert error <= TOLERANCE and valid["tokens"] == 63 * SEQ, valid


def parity(tools, tmp, name, maker, data, tokens):
    model = make(maker, torch.float32)
    hf = os.path.join(tmp, f"{name}_parity_hf")
    model.save_pretrained(hf, safe_serialization=True)

    # The loss and its gradients at the imported weights: step 1's, before its update.
    loss = loss_of(model, tokens)
    loss.backward()
    grads_hf = os.path.join(tmp, f"{name}_grads_hf")
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(grads[k])
    model.save_pretrained(grads_hf, safe_serialization=True)  # the gradients, in the model's own layout
    grads_ckpt = os.path.join(tmp, f"{name}_grads_ckpt")
    run(tools.convert, "--input", grads_hf, "--output", grads_ckpt)  # ...and in Megahost's
    want = read_checkpoint(grads_ckpt)
    config = write_config(tmp, f"{name}_grads", data, hf, steps=1)
    metrics, dump = os.path.join(tmp, f"{name}_grads.jsonl"), os.path.join(tmp, f"{name}.grads")
    run(tools.megahost, "--config", config, "--metrics_out", metrics, "--grads_out", dump)
    got = read_grads(dump)
    assert got.keys() == want.keys(), set(got) ^ set(want)
    worst = max((relative(got[k], want[k].reshape(-1)), k) for k in got)
    loss_error = abs(metrics_loss(metrics, 1) - loss.item()) / loss.item()
    print(f"{name}: loss {loss.item():.6f}, relative error {loss_error:.1e}; {len(got)} gradients, worst relative "
          f"error {worst[0]:.1e} ({worst[1]})")
    assert loss_error <= TOLERANCE and worst[0] <= TOLERANCE, (loss_error, worst)
    check_evaluate(tools, tmp, name, data, hf, loss.item())

    # Three steps of training on two tensor-parallel ranks (so the export
    # assembles sliced tensors), exported: transformers computes the loss that
    # Megahost computes at those weights (step 4's, before its update, on one rank).
    trained = os.path.join(tmp, f"{name}_trained")
    config = write_config(tmp, f"{name}_train", data, hf, steps=3, extra=f'dir = "{trained}"')
    run(tools.megahost, "--config", config, "comm.world_size=2", "parallel.tensor.size=2",
        "--metrics_out", os.path.join(tmp, f"{name}_train.jsonl"))
    step3 = os.path.join(trained, "step_000000003")
    config = write_config(tmp, f"{name}_step4", data, step3, steps=4)
    metrics = os.path.join(tmp, f"{name}_step4.jsonl")
    run(tools.megahost, "--config", config, "model.vocab=384", "model.seq_len=32", "model.layers=2",
        "model.hidden=64", "model.heads=4", "model.dropout=0", "model.attention_dropout=0",
        *variant_keys(model.config), "--metrics_out", metrics)
    exported = os.path.join(tmp, f"{name}_exported")
    run(tools.convert, "--input", step3, "--output", exported)
    with torch.no_grad():
        theirs = loss_of(type(model).from_pretrained(exported).eval(), tokens).item()
    ours = metrics_loss(metrics, 4)
    error = abs(theirs - ours) / ours
    print(f"{name}: after 3 steps, Megahost's loss {ours:.6f}, transformers' on the export {theirs:.6f} "
          f"(relative error {error:.1e}; at import it was {loss.item():.6f})")
    assert error <= TOLERANCE and abs(theirs - loss.item()) > 1e-3, (ours, theirs)


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare", "ckpt"):
        ap.add_argument(f"--{tool}", required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, maker, _ in MODELS:
            for dtype in (torch.float32, torch.bfloat16):
                round_trip(tools, tmp, name, maker, dtype)
        data, tokens = prepare_dataset(tools, tmp)
        for name, maker, engine in MODELS:
            if engine:
                parity(tools, tmp, name, maker, data, tokens)


if __name__ == "__main__":
    main()
