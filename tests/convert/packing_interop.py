"""Packed documents against transformers (docs/finetune.md, Packing).

A randomly initialised GPT-2 and Llama made by transformers, imported by
Megahost and trained one step with [data] reset_position_ids and
reset_attention_mask on a dataset whose every sample is the same window of
three documents (A EOD B EOD C EOD); PyTorch computes the loss and gradients
of that window with position_ids restarting after each EOD and a 4-D
block-diagonal causal mask. Loss and every gradient agree to 1e-4 relative
(fp32; the tolerance of transformers_interop.py, whose helpers this reuses).

Needs torch and transformers; exits 77 (skipped) without them."""
import argparse
import json
import os
import sys
import tempfile

try:
    import torch
    import transformers
    import transformers_interop as interop
except ImportError as e:
    print(f"skipped: {e}; scripts/install-deps.sh installs torch and transformers")
    sys.exit(77)

SEQ = interop.SEQ
EOD = 256
# Three documents and their EODs fill SEQ = 32 tokens exactly, so the stream
# repeats with period SEQ and every window is the same.
DOCS = ["Packing keeps", "them", "apart, okay."]
assert sum(len(d) + 1 for d in DOCS) == SEQ


def prepare_dataset(tools, tmp):
    source = os.path.join(tmp, "packed.jsonl")
    with open(source, "w") as f:
        for _ in range(64):
            for d in DOCS:
                f.write(json.dumps({"text": d}) + "\n")
    prefix = os.path.join(tmp, "packed")
    interop.run(tools.prepare, "--input", source, "--output_prefix", prefix, "--tokenizer", "byte")
    tokens = []
    for d in DOCS:
        tokens += list(d.encode()) + [EOD]
    return prefix, torch.tensor([tokens + tokens[:1]])


def documents(tokens):
    """Position ids restarting after each EOD, and the additive 4-D mask
    [1, 1, SEQ, SEQ] letting position p see its own document up to p."""
    inputs = tokens[0, :SEQ].tolist()
    start, positions, starts = 0, [], []
    for t, token in enumerate(inputs):
        starts.append(start)
        positions.append(t - start)
        if token == EOD:
            start = t + 1
    mask = torch.full((SEQ, SEQ), float("-inf"))
    for p in range(SEQ):
        mask[p, starts[p]:p + 1] = 0.0
    return torch.tensor([positions]), mask[None, None]


def packed_loss(model, tokens):
    positions, mask = documents(tokens)
    logits = model(tokens[:, :SEQ], position_ids=positions, attention_mask=mask).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def parity(tools, tmp, name, maker, data, tokens):
    model = interop.make(maker, torch.float32)
    hf = os.path.join(tmp, f"{name}_hf")
    model.save_pretrained(hf, safe_serialization=True)
    loss = packed_loss(model, tokens)
    unpacked = interop.loss_of(model, tokens).item()
    loss.backward()
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(grads[k])
    grads_hf, grads_ckpt = os.path.join(tmp, f"{name}_grads_hf"), os.path.join(tmp, f"{name}_grads_ckpt")
    model.save_pretrained(grads_hf, safe_serialization=True)
    interop.run(tools.convert, "--input", grads_hf, "--output", grads_ckpt)
    want = interop.read_checkpoint(grads_ckpt)
    config = interop.write_config(tmp, name, data, hf, steps=1)
    metrics, dump = os.path.join(tmp, f"{name}.jsonl"), os.path.join(tmp, f"{name}.grads")
    interop.run(tools.megahost, "--config", config, "data.reset_position_ids=true", "data.reset_attention_mask=true",
                "--metrics_out", metrics, "--grads_out", dump)
    got = interop.read_grads(dump)
    assert got.keys() == want.keys(), set(got) ^ set(want)
    worst = max((interop.relative(got[k], want[k].reshape(-1)), k) for k in got)
    loss_error = abs(interop.metrics_loss(metrics, 1) - loss.item()) / loss.item()
    print(f"{name}: packed loss {loss.item():.6f} (unpacked {unpacked:.6f}), relative error {loss_error:.1e}; "
          f"{len(got)} gradients, worst relative error {worst[0]:.1e} ({worst[1]})")
    assert loss_error <= interop.TOLERANCE and worst[0] <= interop.TOLERANCE, (loss_error, worst)


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare"):
        ap.add_argument(f"--{tool}", required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        data, tokens = prepare_dataset(tools, tmp)
        for name, maker, engine in interop.MODELS:
            if engine:
                parity(tools, tmp, name, maker, data, tokens)


if __name__ == "__main__":
    main()
