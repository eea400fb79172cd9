"""A mixture of experts against the dense model with the same active FLOPs:
8 SwiGLU experts of width f, top-2 routing, against a dense SwiGLU MLP of
width 2f, the rest of the model equal (Llama-style, one rank, cpu kernels).
Runs alternate between the two so that a shared machine's load falls on both
alike; the figure is the ratio of median step times (the seconds themselves
say little on a shared machine).

    python3 bench/moe_vs_dense.py [--steps 6] [--repeats 3] [--dtype fp32]
"""
import argparse

from megahost_run import SINGLE, median_of, run

MODEL = "model.arch=llama model.layers=4 model.hidden=512 model.heads=8 model.seq_len=256 model.vocab=384 " \
        "train.micro_batch=4 train.global_batch=4"
EXPERT_WIDTH = 512
VARIANTS = {
    "dense": f"model.ffn_hidden={2 * EXPERT_WIDTH}",
    "moe": f"model.experts=8 model.router_topk=2 model.moe_ffn_hidden={EXPERT_WIDTH} "
           f"model.ffn_hidden={2 * EXPERT_WIDTH}",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    args = ap.parse_args()
    times = {v: [] for v in VARIANTS}
    for _ in range(args.repeats):
        for name, keys in VARIANTS.items():
            records, _ = run(f"{SINGLE} {MODEL} kernels.dtype={args.dtype} {keys}", args.steps)
            times[name].append(median_of(records, "step_s"))
    median = {v: sorted(t)[len(t) // 2] for v, t in times.items()}
    print(f"{MODEL}, {args.dtype}; 8 experts of {EXPERT_WIDTH}, top 2, against a dense MLP of {2 * EXPERT_WIDTH}")
    print(f"step time: dense {median['dense']:.3f} s, moe {median['moe']:.3f} s, "
          f"moe / dense {median['moe'] / median['dense']:.3f} (medians of {args.repeats} runs of {args.steps} steps)")


if __name__ == "__main__":
    main()
