"""Context parallelism against an ideal split of the one-rank step: the step
time of cp 2 on two ranks (one core each) at a long sequence, against half
the step time of one rank on one core, the flash core on both (the unfused
core's s x s scores would not fit at s = 8k). Runs alternate so that a shared
machine's load falls on both alike; the figure is the ratio of medians.

    python3 bench/context_parallel.py [--seq 8192] [--steps 3] [--repeats 3] [--comm_type all_gather|a2a]
"""
import argparse

from megahost_run import SINGLE, median_of, run

MODEL = "model.layers=2 model.hidden=256 model.heads=4 model.vocab=384 model.attention_backend=flash " \
        "train.micro_batch=1 train.global_batch=1"


def layouts(comm_type):
    return {
        "one rank, one core": "kernels.threads=1",
        "cp 2, a core each": f"comm.world_size=2 parallel.context.size=2 parallel.context.comm_type={comm_type} "
                             "kernels.threads=1",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--comm_type", choices=["all_gather", "a2a"], default="all_gather",
                    help="parallel.context.comm_type of the cp 2 run")
    args = ap.parse_args()
    runs = layouts(args.comm_type)
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, keys in runs.items():
            records, _ = run(f"{SINGLE} {MODEL} model.seq_len={args.seq} {keys}", args.steps)
            times[name].append(median_of(records, "step_s"))
    one, cp = (sorted(t)[len(t) // 2] for t in times.values())
    print(f"{MODEL}, s = {args.seq}, comm_type {args.comm_type}")
    print(f"step time: one rank {one:.3f} s, cp 2 {cp:.3f} s; cp 2 / ideal split (one rank / 2) {cp / (one / 2):.3f} "
          f"(medians of {args.repeats} runs of {args.steps} steps)")


if __name__ == "__main__":
    main()
