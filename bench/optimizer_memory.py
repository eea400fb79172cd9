"""Bytes per parameter of the distributed optimizer, from dry runs.

For each data-parallel size d, a dry run of the GPT-2 small model (12 layers,
h = 768) on d thread ranks reports every rank's peaks per category; the
parameters of a rank are its fp32 dry run's `params` bytes / 4. Prints
(params + grads + optimizer) / parameters for bf16 with the distributed
optimizer, beside Megatron-LM's 6 + 12/d and the all-reduce figure.

    python3 bench/optimizer_memory.py
"""
import sys

from megahost_run import run

MODEL = "model.layers=12 model.hidden=768 model.heads=12 model.seq_len=256 model.vocab=50304 " \
        "train.micro_batch=1 parallel.tensor.size=1 parallel.pipeline.size=1 recompute.plugin=none"


def state_bytes(final):
    rank = final["memory"][0]
    return rank["params"], rank["grads"], rank["optimizer"]


def main():
    print("| d | parameters per rank | bf16 all-reduce | bf16 distributed | 2 + 4 + 12/d | off by |")
    print("|---|---|---|---|---|---|")
    for d in (1, 2, 4, 8, 16):
        layout = f"{MODEL} comm.world_size={d} train.global_batch={d}"
        _, fp32 = run(layout, 1, ["--dry_run"])
        parameters = state_bytes(fp32)[0] / 4
        _, plain = run(layout + " kernels.dtype=bf16", 1, ["--dry_run"])
        _, sharded = run(layout + " kernels.dtype=bf16 parallel.data.distributed_optimizer=true", 1, ["--dry_run"])
        per_plain = sum(state_bytes(plain)) / parameters
        per_sharded = sum(state_bytes(sharded)) / parameters
        expected = 18.0 if d == 1 else 6 + 12 / d
        print(f"| {d} | {parameters:,.0f} | {per_plain:.3f} | {per_sharded:.3f} | {expected:.3f} | "
              f"{100 * (per_sharded / expected - 1):+.2f}% |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
