#!/usr/bin/env python3
"""Plots a metrics file's loss curves (training loss per step, validation
loss) to a PNG: scripts/plot_metrics.py m.jsonl -o loss.png.
A file holding several runs (each starts with a {"run": ...} record) gives
one curve per run; --last plots the newest only."""
import argparse
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit(f"missing Python package ({e}); run scripts/install-deps.sh, then $(scripts/python-env) scripts/plot_metrics.py")


def runs(path):
    """Each run's (steps, losses, val_steps, val_losses)."""
    out = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not a JSON record ({e}); is this a megahost metrics file?")
            if "run" in record or not out:
                out.append(([], [], [], []))
            steps, losses, val_steps, val_losses = out[-1]
            if "loss" in record and "step" in record:  # --evaluate's records have no step
                steps.append(record["step"])
                losses.append(record["loss"])
            if "val_loss" in record:
                val_steps.append(record["step"])
                val_losses.append(record["val_loss"])
    return [r for r in out if r[0] or r[2]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", help="a megahost metrics file (--metrics_out / output.metrics)")
    parser.add_argument("-o", "--output", default="loss.png", help="the PNG to write")
    parser.add_argument("--last", action="store_true", help="plot only the newest run in the file")
    args = parser.parse_args()
    found = runs(args.metrics)
    if not found:
        sys.exit(f"{args.metrics}: no loss records to plot")
    if args.last:
        found = found[-1:]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (steps, losses, val_steps, val_losses) in enumerate(found):
        label = f"run {i + 1}: " if len(found) > 1 else ""
        line, = ax.plot(steps, losses, label=label + "training loss")
        if val_steps:
            ax.plot(val_steps, val_losses, "o--", color=line.get_color(), label=label + "validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
