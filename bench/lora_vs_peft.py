#!/usr/bin/env python3
"""LoRA fine-tuning: Megahost's step against its full fine-tuning and against PyTorch + peft.

The model is the "llama_small" of bench/cpu_vs_torch.py (12 layers, h = 768, 12 heads, 3
key/value heads, SwiGLU f = 2048, vocabulary 50304, s = 256, batch 4, untied, no biases, no
dropout), fp32 on the CPU, one rank. LoRA has r = 8, alpha = 16 on every linear layer of every
layer (q/k/v, o, gate, up, down), the base frozen. In order, each in a fresh process, with the
same threads:
  1. Megahost, full fine-tuning (every weight trains);
  2. Megahost, [peft] method = "lora";
  3. PyTorch: transformers' LlamaForCausalLM of the same shape wrapped by peft's get_peft_model
     with the same LoraConfig, AdamW over the adapters, the same batch of random tokens;
  4. its dry runs: the optimizer state's bytes of 1 and 2.
A step time is the median over the measured steps (the first `--warmup` skipped): wall seconds,
and beside them CPU seconds per step (a run of `--steps` steps against a run of `--warmup` steps,
the difference of the processes' user + system time over the steps between), which another load on
the machine disturbs less than the wall clock. The table gives
LoRA / full for Megahost (target <= 0.75), torch+peft / Megahost LoRA (target >= 1.25) and the
optimizer memory ratio (target <= 0.02).

  $(scripts/python-env) bench/lora_vs_peft.py [--threads 1] [--layers 12] [--steps 4] [--warmup 1]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megahost_run  # noqa: E402

SHAPE = dict(hidden=768, heads=12, kv_heads=3, ffn=2048, seq=256, batch=4, vocab=50304)
RANK, ALPHA = 8, 16


def megahost_overrides(layers, threads, lora):
    s = SHAPE
    text = (f"{megahost_run.SINGLE} model.arch=llama model.layers={layers} model.hidden={s['hidden']} "
            f"model.heads={s['heads']} model.kv_heads={s['kv_heads']} model.ffn_hidden={s['ffn']} "
            f"model.seq_len={s['seq']} model.vocab={s['vocab']} train.micro_batch={s['batch']} "
            f"train.global_batch={s['batch']} train.warmup_steps=1 train.log_interval=1 kernels.threads={threads}")
    return text + (f" peft.method=lora peft.rank={RANK} peft.alpha={ALPHA}" if lora else "")


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def megahost_step(layers, threads, steps, warmup, lora):
    """(wall seconds, CPU seconds) per step."""
    start = children_cpu_s()
    records, _ = megahost_run.run(megahost_overrides(layers, threads, lora), steps)
    middle = children_cpu_s()
    megahost_run.run(megahost_overrides(layers, threads, lora), warmup)
    cpu = ((middle - start) - (children_cpu_s() - middle)) / (steps - warmup)
    return megahost_run.median_of(records, "step_s", skip=warmup), cpu


def megahost_optimizer_bytes(layers, threads, lora):
    _, final = megahost_run.run(megahost_overrides(layers, threads, lora), 1, ["--dry_run"])
    return final["memory"][0]["optimizer"]


TORCH_CHILD = r'''
import statistics, sys, time, torch, transformers, peft
layers, threads, steps, warmup = map(int, sys.argv[1:5])
torch.set_num_threads(threads)
torch.manual_seed(0)
s = dict(hidden=768, heads=12, kv_heads=3, ffn=2048, seq=256, batch=4, vocab=50304)
config = transformers.LlamaConfig(hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=layers,
                                  num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                                  vocab_size=s["vocab"], max_position_embeddings=s["seq"], tie_word_embeddings=False)
model = transformers.LlamaForCausalLM(config)
model = peft.get_peft_model(model, peft.LoraConfig(r=%d, lora_alpha=%d, lora_dropout=0.0, target_modules=[
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], task_type="CAUSAL_LM"))
model.train()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
tokens = torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1))
times, cpu = [], []
for step in range(steps):
    start, start_cpu = time.perf_counter(), time.process_time()
    logits = model(tokens[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
print(statistics.median(times[warmup:] or times), statistics.median(cpu[warmup:] or cpu))
''' % (RANK, ALPHA)


def torch_step(layers, threads, steps, warmup):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", TORCH_CHILD, str(layers), str(threads), str(steps), str(warmup)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    full = megahost_step(a.layers, a.threads, a.steps, a.warmup, lora=False)
    lora = megahost_step(a.layers, a.threads, a.steps, a.warmup, lora=True)
    torch_peft = torch_step(a.layers, a.threads, a.steps, a.warmup)
    opt_full = megahost_optimizer_bytes(a.layers, a.threads, lora=False)
    opt_lora = megahost_optimizer_bytes(a.layers, a.threads, lora=True)
    print(f"llama_small, {a.layers} layers, fp32, {a.threads} thread(s), r = {RANK}, alpha = {ALPHA}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'run':<28}{'wall s':>10}{'CPU s':>10}")
    for name, (wall, cpu) in (("megahost full fine-tuning", full), ("megahost LoRA", lora),
                              ("torch + peft LoRA", torch_peft)):
        print(f"{name:<28}{wall:>10.3f}{cpu:>10.3f}")
    print(f"LoRA / full step time: wall {lora[0] / full[0]:.3f}, CPU {lora[1] / full[1]:.3f} (target <= 0.75)")
    print(f"torch+peft / megahost LoRA: wall {torch_peft[0] / lora[0]:.2f}x, CPU {torch_peft[1] / lora[1]:.2f}x "
          f"(target >= 1.25)")
    print(f"optimizer bytes LoRA / full (dry run): {opt_lora / opt_full:.4f} (target <= 0.02)")


if __name__ == "__main__":
    main()
