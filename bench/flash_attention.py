"""Memory-efficient attention (model.attention_backend = "flash") against the
unfused core: the dry run's peak activation memory of one rank at s = 1k, 2k,
4k and 8k, and the step time of both at one s on the cpu kernels (the
machine may be shared: read the ratio, not the seconds).

    python3 bench/flash_attention.py [--steps 6] [--repeats 3] [--seq 512]
"""
import argparse

from megahost_run import SINGLE, median_of, run

MODEL = "model.layers=4 model.hidden=512 model.heads=8 model.vocab=384 train.micro_batch=1 train.global_batch=1"
BACKENDS = ("unfused", "flash")


def dry_activations(seq, backend):
    _, final = run(f"{SINGLE} {MODEL} model.seq_len={seq} model.attention_backend={backend}", 1, ("--dry_run",))
    return final["memory"][0]["activations"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seq", type=int, default=512)
    args = ap.parse_args()
    print("s      unfused MiB   flash MiB   flash / unfused")
    for seq in (1024, 2048, 4096, 8192):
        unfused, flash = (dry_activations(seq, b) for b in BACKENDS)
        print(f"{seq:<6} {unfused / 2**20:11.1f} {flash / 2**20:11.1f} {flash / unfused:15.3f}")
    times = {b: [] for b in BACKENDS}
    for _ in range(args.repeats):
        for b in BACKENDS:
            records, _ = run(f"{SINGLE} {MODEL} model.seq_len={args.seq} model.attention_backend={b}", args.steps)
            times[b].append(median_of(records, "step_s"))
    median = {b: sorted(t)[len(t) // 2] for b, t in times.items()}
    print(f"step time at s = {args.seq}: unfused {median['unfused']:.3f} s, flash {median['flash']:.3f} s, "
          f"flash / unfused {median['flash'] / median['unfused']:.3f}")


if __name__ == "__main__":
    main()
