"""A model's whole life, no model key typed twice (docs/convert.md).

A small Llama made by transformers (grouped-query attention, rotary positions for 64 tokens,
the byte tokenizer's 257 ids) is fine-tuned by Megahost straight from its Hugging Face folder
on tensor parallelism 2 at 32 positions, killed with SIGKILL while it saves, resumed with
checkpoint.load = "auto", evaluated and served on one rank (the checkpoint resharded as it
loads), and exported. Only the first run names anything of the model (model.seq_len, the
tokenizer); every later run takes the model from the checkpoint. transformers' AutoTokenizer
and AutoModelForCausalLM load the export with no extra argument, encode the prompt to the ids
Megahost encoded, and generate greedily the ids Megahost generated.

Needs torch and transformers (scripts/install-deps.sh); exits 77 (skipped) without them."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers
except ImportError as e:
    print(f"skipped: {e}; scripts/install-deps.sh installs torch and transformers")
    sys.exit(77)

# generate() asks whether FSDP manages the model, importing torch.distributed.fsdp, which
# Debian's torch 1.13 cannot import under Python 3.11. Nothing here is distributed.
transformers.generation.utils.is_fsdp_managed_module = lambda module: False

STEPS = 6
PROMPT = "It is a truth"  # with NEW, within the fine-tune's 32 positions
NEW = 10


def run(*args, expect=0):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace")
    if p.returncode != expect:
        sys.exit(f"{' '.join(map(str, args))}\nexited {p.returncode} (expected {expect}):\n{p.stdout}\n{p.stderr}")
    return p.stdout + p.stderr


def make_llama(folder):
    torch.manual_seed(27)
    config = transformers.LlamaConfig(vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=256, eos_token_id=256,
                                      tie_word_embeddings=False)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(folder, safe_serialization=True)


def prepare_corpus(tools, source, tmp):
    """The first documents of the shipped corpus, byte-tokenized: enough for a few steps and a
    validation split, small enough that evaluating it whole takes a moment."""
    with open(source, encoding="utf-8") as f:
        text = f.read(200_000)
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[: text.rfind("\n\n")])
    prefix = os.path.join(tmp, "corpus")
    run(tools.prepare, "--input", path, "--output_prefix", prefix, "--tokenizer", "byte", "--append_eod")
    return prefix


def write_config(tmp, hf, corpus):
    path = os.path.join(tmp, "finetune.toml")
    with open(path, "w") as f:
        f.write(f"""# The fine-tune's run: no [model], no tokenizer; they come from what is loaded.
[train]
steps = {STEPS}
global_batch = 4
micro_batch = 2
lr = 2e-4
warmup_steps = 1
eval_interval = 0
[data]
path = "{corpus}"
[checkpoint]
dir = "checkpoints"
interval = 2
load = "{hf}"
[kernels]
threads = 1
dtype = "fp32"
[comm]
world_size = 2
[parallel.tensor]
size = 2
""")
    return path


def killed_fine_tune(tools, config):
    """SIGKILL in the middle of step 4's save (its third rank file: step 2 wrote two), as kill -9
    would: step 2's checkpoint is the newest complete one."""
    env = dict(os.environ, MEGAHOST_FAILPOINT="checkpoint.rank_file_written:3")
    args = [tools.megahost, "--config", config, "model.seq_len=32", "data.tokenizer=byte"]
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, errors="replace", env=env)
    assert p.returncode == -signal.SIGKILL, f"exited {p.returncode}, not killed:\n{p.stderr}"


def megahost_generation(tools, config, tmp):
    metrics = os.path.join(tmp, "generate.jsonl")
    run(tools.megahost, "--config", config, "checkpoint.load=auto", "comm.world_size=1", "parallel.tensor.size=1",
        f"generate.prompt={PROMPT}", f"generate.max_new_tokens={NEW}", "generate.temperature=0",
        "generate.stop_at_eod=false", "--metrics_out", metrics)
    with open(metrics) as f:
        record = next(r for r in map(json.loads, f) if "request" in r)
    return record["tokens"]


def check_export(folder, want_tokens):
    with open(os.path.join(folder, "config.json")) as f:
        text = f.read()
    config = json.loads(text)
    assert config["max_position_embeddings"] == 64, "the model's own positions, not the fine-tune's seq_len"
    assert '"rms_norm_eps": 1e-05' in text, "the epsilon as written"
    assert config["bos_token_id"] == 256 and config["eos_token_id"] == 256, config
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    inputs = tokenizer(PROMPT, return_tensors="pt")
    assert inputs.input_ids[0].tolist() == list(PROMPT.encode()), "the tokenizer encodes as Megahost's byte tokenizer"
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=NEW, do_sample=False)
    got = out[0, inputs.input_ids.shape[1]:].tolist()
    assert got == want_tokens, f"transformers generates {got}, Megahost {want_tokens}"
    return tokenizer.decode(out[0])


def main():
    ap = argparse.ArgumentParser()
    for tool in ("megahost", "prepare", "convert", "ckpt"):
        ap.add_argument(f"--{tool}", required=True)
    ap.add_argument("--corpus", required=True, help="the shipped corpus.txt")
    tools = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="megahost_life_") as tmp:
        hf = os.path.join(tmp, "llama")
        make_llama(hf)
        config = write_config(tmp, hf, prepare_corpus(tools, tools.corpus, tmp))
        checkpoints = os.path.join(tmp, "checkpoints")

        killed_fine_tune(tools, config)
        log = run(tools.megahost, "--config", config, "checkpoint.load=auto")
        assert f"resumed from {checkpoints}/step_000000002" in log, log[-3000:]
        info = run(tools.ckpt, "info", checkpoints)
        assert "step 6" in info and "TP 2" in info and "max_positions    64" in info and "seq_len          32" in info, info
        print(f"fine-tuned on TP 2, killed saving step 4, resumed from step 2 to step {STEPS}")

        evaluated = run(tools.megahost, "--config", config, "--evaluate", "checkpoint.load=auto", "comm.world_size=1",
                        "parallel.tensor.size=1")
        assert "valid: loss" in evaluated, evaluated
        print("evaluated on one rank:", next(l for l in evaluated.splitlines() if l.startswith("valid: loss")))

        tokens = megahost_generation(tools, config, tmp)
        export = os.path.join(tmp, "export")
        run(tools.convert, "--input", checkpoints, "--output", export)
        text = check_export(export, tokens)
        print(f"exported; transformers generates Megahost's ids {tokens}: {text!r}")


if __name__ == "__main__":
    main()
