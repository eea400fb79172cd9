"""Cost of activation recomputation: step time of `selective` and `full`
relative to `none` on the "tiny" and "small" configs, and the extra FLOPs
each executes (hardware over model FLOPs, counted from the GEMMs issued)
beside the paper's figures: selective recomputes the attention core,
full recomputes one whole forward (logits excluded).

    python3 bench/recompute_cost.py [--steps 6] [--repeats 3] [--configs tiny,small]
"""
import argparse

from megahost_run import SINGLE, SMALL, TINY, median_of, run

POLICIES = {"none": "recompute.plugin=none", "selective": "recompute.plugin=selective",
            "full": "recompute.plugin=full recompute.method=uniform recompute.num_layers=1"}


def paper_extra(cfg, policy):
    """Extra FLOPs as a fraction of model FLOPs ([K22] Eq. 7; Eq. 8; [N21] Eq. 3)."""
    s, h, L, V = cfg["s"], cfg["h"], cfg["L"], cfg["V"]
    model = 1 + s / (6 * h) + V / (12 * h * L)
    if policy == "selective":
        return (1 + s / (3 * h) + V / (12 * h * L)) / model - 1
    if policy == "full":
        return 96 / 72 * (1 + s / (6 * h) + V / (16 * h * L)) / model - 1
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--configs", default="tiny,small")
    args = ap.parse_args()
    shapes = {"tiny": (TINY, dict(s=128, h=256, L=4, V=256)), "small": (SMALL, dict(s=256, h=768, L=12, V=50304))}
    print(f"{'config':6} {'policy':10} {'step s':>8} {'vs none':>8} {'extra FLOPs':>12} {'paper':>8}")
    for name in args.configs.split(","):
        overrides, cfg = shapes[name]
        times = {p: [] for p in POLICIES}
        extra = {}
        for _ in range(args.repeats):  # interleaved, so machine noise hits every policy alike
            for policy, flags in POLICIES.items():
                records, _ = run(f"{SINGLE} {overrides} {flags} kernels.threads=2", args.steps)
                times[policy].append(median_of(records, "step_s"))
                extra[policy] = median_of(records, "hw_tflops") / median_of(records, "tflops") - 1
        base = sorted(times["none"])[len(times["none"]) // 2]
        for policy in POLICIES:
            t = sorted(times[policy])[len(times[policy]) // 2]
            print(f"{name:6} {policy:10} {t:8.3f} {t / base - 1:+8.1%} {extra[policy]:+12.1%} "
                  f"{paper_extra(cfg, policy):+8.1%}")


if __name__ == "__main__":
    main()
