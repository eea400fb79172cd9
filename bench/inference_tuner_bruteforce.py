"""The inference tuner against brute force on this machine.

Tunes bench/tuner_small.toml for generation on thread ranks -- every
t in {1, 2, 4}, p in {1, 2} and batch in {1, 4} (12 candidates) -- once for
each inference goal, then runs every candidate's generate config (the one
the tuner dry-ran, in its runs/ folder) several times in shuffled rounds,
each candidate's time to first token (TTFT) and time per output token (TPOT)
the median over its runs. Reports the cost model's error for TTFT and TPOT
and how far each goal's pick is from the fastest measured candidate (the
pass mark: 5%).
"""
import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "bench", "tuner_small.toml")
GOALS = ("inference_latency", "inference_throughput")


def megahost(binary, args):
    # Bytes, not text: an untrained model's completions are arbitrary bytes.
    proc = subprocess.run([binary, *args], capture_output=True)
    if proc.returncode != 0:
        sys.exit(f"megahost {' '.join(args)} failed:\n{proc.stderr[-3000:].decode(errors='replace')}")


def tune(binary, out, goal, args):
    megahost(binary, ["--config", CONFIG, f"output.dir={out}", "tuner.plugin=grid", f"tuner.goal={goal}",
                      f"tuner.cluster={args.profile}", f"tuner.gpus_per_node={args.devices}",
                      "tuner.tensor=1,2,4", "tuner.pipeline=1,2", "tuner.inference_batch=1,4",
                      f"tuner.prompt_len={args.prompt_len}", f"tuner.output_len={args.output_len}", *args.set])
    with open(os.path.join(out, "ranked.csv")) as f:
        return list(csv.DictReader(f))


def key(t, p, batch):
    return f"t={t} p={p} batch={batch}"


def generate_configs(out):
    """The generate config the tuner wrote for each candidate, by candidate."""
    configs = {}
    runs = os.path.join(out, "runs")
    for name in sorted(os.listdir(runs)):
        if not (name.startswith("candidate") and name.endswith(".toml")):
            continue
        with open(os.path.join(runs, name), "rb") as f:
            c = tomllib.load(f)
        configs[key(c["parallel"]["tensor"]["size"], c["parallel"]["pipeline"]["size"], c["generate"]["batch"])] = \
            os.path.join(runs, name)
    return configs


def run_once(binary, config):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        megahost(binary, ["--config", config, "--metrics_out", metrics])
        records = [r for r in map(json.loads, open(metrics)) if "ttft_s" in r]
    return statistics.median(r["ttft_s"] for r in records), statistics.median(r["tpot_s"] for r in records)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megahost", default=os.path.join(ROOT, "build", "bin", "megahost"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "inference_tuner_bruteforce_out"))
    ap.add_argument("--profile", default="local_cpu", help="the tuner's cluster: a profile name or .toml file")
    ap.add_argument("--devices", type=int, default=8, help="thread ranks the tuner may use (its gpus_per_node)")
    ap.add_argument("--prompt_len", type=int, default=64)
    ap.add_argument("--output_len", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of bench/tuner_small.toml, e.g. model.hidden=1024 (repeatable)")
    args = ap.parse_args()
    load_before = os.getloadavg()
    ranked = {}
    for goal in GOALS:
        out = os.path.abspath(os.path.join(args.out, goal))
        os.makedirs(out, exist_ok=True)
        ranked[goal] = tune(args.megahost, out, goal, args)
    rows = {key(r["tensor"], r["pipeline"], r["batch"]): r for r in ranked[GOALS[0]]}
    if len(rows) < 12:
        sys.exit(f"only {len(rows)} candidates fit; the brute force needs at least 12")
    configs = generate_configs(os.path.abspath(os.path.join(args.out, GOALS[0])))
    runs = {k: [] for k in rows}
    for r in range(args.repeats):
        order = sorted(rows)
        random.Random(r).shuffle(order)
        for k in order:
            runs[k].append(run_once(args.megahost, configs[k]))
        print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)

    out_len = args.output_len
    table = []
    for k, row in rows.items():
        ttft = statistics.median(a for a, _ in runs[k])
        tpot = statistics.median(b for _, b in runs[k])
        batch = int(row["batch"])
        table.append({"candidate": k, "batch": batch,
                      "ttft_pred": float(row["ttft_s_predicted"]), "ttft": ttft,
                      "tpot_pred": float(row["tpot_s_predicted"]), "tpot": tpot,
                      "latency": ttft + out_len * tpot, "tokens_per_s": batch * out_len / (ttft + out_len * tpot),
                      "memory_gib": float(row["memory_gib"])})
    with open(os.path.join(args.out, "bruteforce.csv"), "w") as f:
        f.write("candidate,ttft_s_predicted,ttft_s_measured,tpot_s_predicted,tpot_s_measured,latency_s_measured,"
                "tokens_per_s_measured,memory_gib\n")
        for r in table:
            f.write(f"{r['candidate']},{r['ttft_pred']:.6f},{r['ttft']:.6f},{r['tpot_pred']:.6f},{r['tpot']:.6f},"
                    f"{r['latency']:.6f},{r['tokens_per_s']:.1f},{r['memory_gib']:.3f}\n")
    print(f"{'candidate':18s} {'TTFT pred s':>11s} {'measured':>9s} {'err':>6s} {'TPOT pred ms':>12s} {'measured':>9s} "
          f"{'err':>6s} {'tok/s':>8s} {'mem GiB':>8s}")
    for r in sorted(table, key=lambda r: r["latency"]):
        print(f"{r['candidate']:18s} {r['ttft_pred']:11.4f} {r['ttft']:9.4f} {100 * (r['ttft_pred'] / r['ttft'] - 1):5.0f}% "
              f"{1e3 * r['tpot_pred']:12.3f} {1e3 * r['tpot']:9.3f} {100 * (r['tpot_pred'] / r['tpot'] - 1):5.0f}% "
              f"{r['tokens_per_s']:8.0f} {r['memory_gib']:8.3f}")
    for what in ("ttft", "tpot"):
        errors = [abs(r[what + "_pred"] / r[what] - 1) * 100 for r in table]
        print(f"{what.upper()}: median |predicted - measured| / measured {statistics.median(errors):.1f}%, "
              f"max {max(errors):.1f}%")
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f on %d CPUs"
          % (*load_before, *os.getloadavg(), os.cpu_count()))
    by_key = {r["candidate"]: r for r in table}
    worst = 0.0
    for goal, measure, better in (("inference_latency", "latency", min), ("inference_throughput", "tokens_per_s", max)):
        top = ranked[goal][0]
        pick = by_key[key(top["tensor"], top["pipeline"], top["batch"])]
        best = better(table, key=lambda r: r[measure])
        gap = 100 * (pick["latency"] / best["latency"] - 1 if measure == "latency"
                     else best["tokens_per_s"] / pick["tokens_per_s"] - 1)
        worst = max(worst, gap)
        print(f"{goal}: the tuner's pick {pick['candidate']} ({measure} {pick[measure]:.4g} measured); fastest "
              f"measured {best['candidate']} ({best[measure]:.4g}); the pick is {gap:.1f}% behind")
    sys.exit(0 if worst <= 5.0 else 1)


if __name__ == "__main__":
    main()
