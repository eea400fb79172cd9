"""Pipeline behaviour: the measured bubble (idle share of each stage's step,
from the per-stage busy/idle times in the metrics) against (p-1)/m for
1F1B and (p-1)/(v m) interleaved, and the first stage's activation memory
(exact, from dry runs) against the paper's in-flight factor: p micro-batches
of L/p layers for 1F1B, L (1 + (p-1)/(p v)) layers' worth interleaved.

    python3 bench/pipeline_bubble.py [--steps 4]

With more stages than cores the stages also compete for the CPU, which
inflates busy time; read the bubble figures with the core count in mind.
"""
import argparse

from megahost_run import SINGLE, median_of, run

MODEL = "model.layers=8 model.hidden=128 model.heads=4 model.seq_len=64 train.micro_batch=1 kernels.threads=1"


def bubble(records):
    """Mean over stages of idle / (busy + idle), median over steps."""
    per_step = []
    for r in records[1:] or records:
        fractions = [i / (b + i) for b, i in zip(r["stage_busy_s"], r["stage_idle_s"]) if b + i > 0]
        per_step.append(sum(fractions) / len(fractions))
    per_step.sort()
    return per_step[len(per_step) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    print(f"{'schedule':12} {'p':>2} {'v':>2} {'m':>3} {'bubble':>8} {'theory':>8} "
          f"{'stage0 act MiB':>15} {'per layer':>10} {'layers held':>12} {'paper':>6}")
    for p, v, m, schedule in [(2, 1, 4, "1f1b"), (2, 1, 8, "1f1b"), (4, 1, 8, "1f1b"), (4, 1, 16, "1f1b"),
                              (2, 2, 4, "interleaved"), (2, 2, 8, "interleaved"), (4, 2, 8, "interleaved"),
                              (2, 1, 8, "gpipe")]:
        layout = (f"{SINGLE} {MODEL} comm.world_size={p} parallel.pipeline.size={p} "
                  f"parallel.pipeline.schedule={schedule} parallel.pipeline.virtual_stages={v} "
                  f"train.global_batch={m}")
        records, _ = run(layout, args.steps)
        _, final = run(layout, 1, ["--dry_run"])
        per_layer = final["activations_formula_per_layer"]
        stage0 = final["memory"][0]["activations"]
        held = stage0 / per_layer
        L = 8
        paper = {"1f1b": L, "gpipe": L * m / p, "interleaved": L * (1 + (p - 1) / (p * v))}[schedule]
        theory = (p - 1) / (v * m)
        print(f"{schedule:12} {p:2} {v:2} {m:3} {bubble(records):8.1%} {theory:8.1%} "
              f"{stage0 / 2**20:15.2f} {per_layer / 2**20:10.3f} {held:12.1f} {paper:6.1f}")


if __name__ == "__main__":
    main()
