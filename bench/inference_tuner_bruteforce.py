"""The inference tuner against brute force on this machine.

Tunes bench/tuner_small.toml for generation on thread ranks -- every
t in {1, 2, 4}, p in {1, 2} and batch in {1, 4} (12 candidates) -- once for
each inference goal, on a hardware profile (by default a fresh
`megahost --calibrate quick` of this machine), then runs every candidate's
generate config (the one the tuner dry-ran, in its runs/ folder) serving
warm-up batches and 5 more one after the other, in shuffled rounds: the
warm-up is the batches of the run's first 0.25 s as the cost model predicts
them (at least one), as in the tuner's measured runs; each other batch is a
measurement, and a candidate's time to
first token (TTFT) and time per output token (TPOT) are the medians of its
measurements. Prints the fidelity table: the cost model's median and max
error for TTFT and TPOT and how far each goal's pick is behind the fastest
measured candidate (the pass mark: 5%; --max-median-error adds a bound on
the errors). Two picks per goal: the cost model's alone (its best
prediction), and the tuner's with its measured re-ranking of its --top_k
best predictions (tuner.top_k, what a user runs; 0 skips it); the pass mark
applies to the tuner's.
"""
import argparse
import csv
import json
import math
import os
import random
import statistics
import sys
import tempfile
import tomllib

from tuner_bench import CONFIG, ROOT, fidelity_table, megahost, quick_profile
GOALS = ("inference_latency", "inference_throughput")
BATCHES = 5  # measured batches per run, after the warm-up
WARM_UP_SECONDS = 0.25  # as the tuner's measured runs (host/tuner/probe.hpp): a fresh team settles in 10-200 ms
MOST_WARM_UP_BATCHES = 64


def warm_up_batches(predicted_batch_seconds):
    """The batches a run's first WARM_UP_SECONDS serve, as predicted, and at least one."""
    return max(1, min(MOST_WARM_UP_BATCHES, math.ceil(WARM_UP_SECONDS / predicted_batch_seconds)))




def tune(binary, out, goal, args):
    megahost(binary, ["--config", CONFIG, f"output.dir={out}", "tuner.plugin=grid", f"tuner.goal={goal}",
                      f"tuner.cluster={args.profile}", f"tuner.gpus_per_node={args.devices}",
                      "tuner.tensor=1,2,4", "tuner.pipeline=1,2", "tuner.inference_batch=1,4",
                      f"tuner.prompt_len={args.prompt_len}", f"tuner.output_len={args.output_len}",
                      f"tuner.top_k={args.top_k}", *args.set])
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


def prompts(batch, tokens, waves):
    """waves * batch different prompts of `tokens` characters, as the tuner writes them (host/tuner/prompts_file.cpp)."""
    lines = []
    for line in range(batch * waves):
        lines.append("".join(" " if i % 6 == 5 and i + 1 != tokens else chr(ord("a") + (line * 7 + i * 3) % 26)
                             for i in range(tokens)))
    return "\n".join(lines) + "\n"


def repeated(config, tmp, prompt_len, warm_up):
    """The candidate's generate config serving warm_up + BATCHES batches one after the other."""
    with open(config, "rb") as f:
        c = tomllib.load(f)
    batch = c["generate"]["batch"]
    file = os.path.join(tmp, "prompts.txt")
    with open(file, "w") as f:
        f.write(prompts(batch, prompt_len, warm_up + BATCHES))
    text = open(config).read().replace(c["generate"]["prompts_file"], file)
    out = os.path.join(tmp, "run.toml")
    with open(out, "w") as f:
        f.write(text)
    return out, batch


def run_once(binary, config, prompt_len, output_len, warm_up):
    """Each measured batch's (ttft, tpot, latency): the medians over its requests."""
    with tempfile.TemporaryDirectory() as tmp:
        run, batch = repeated(config, tmp, prompt_len, warm_up)
        metrics = os.path.join(tmp, "m.jsonl")
        megahost(binary, ["--config", run, "--metrics_out", metrics])
        records = [r for r in map(json.loads, open(metrics)) if "ttft_s" in r]
    out = []
    for wave in range(warm_up, warm_up + BATCHES):
        rs = records[wave * batch:(wave + 1) * batch]
        ttft = statistics.median(r["ttft_s"] for r in rs)
        tpot = statistics.median(r["tpot_s"] for r in rs)
        out.append((ttft, tpot, ttft + output_len * tpot))
    return out




def predicted_latency(row, output_len):
    """The cost model's seconds of one batch (ranked.csv's latency_s is the measured one where top_k ran it)."""
    return float(row["ttft_s_predicted"]) + output_len * float(row["tpot_s_predicted"])


def spread(values):
    """Half the interquartile range over the median."""
    q = statistics.quantiles(values, n=4, method="inclusive")
    return (q[2] - q[0]) / 2 / statistics.median(values)




def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megahost", default=os.path.join(ROOT, "build", "bin", "megahost"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "inference_tuner_bruteforce_out"))
    ap.add_argument("--profile", help="the tuner's cluster (a profile name or .toml file); default: a fresh "
                                      "`megahost --calibrate quick` of this machine")
    ap.add_argument("--devices", type=int, default=8, help="thread ranks the tuner may use (its gpus_per_node)")
    ap.add_argument("--prompt_len", type=int, default=64)
    ap.add_argument("--output_len", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each candidate, each of a warm-up and 5 batches")
    ap.add_argument("--top_k", type=int, default=3, help="the tuner's measured re-ranking of its best predictions")
    ap.add_argument("--short", action="store_true", help="CI's check: one run of each candidate, no re-ranking")
    ap.add_argument("--max-median-error", type=float,
                    help="also fail when the TTFT or TPOT median error exceeds this, percent")
    ap.add_argument("--max-pick-behind", type=float, default=5.0, help="fail when a pick is further behind, percent")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of bench/tuner_small.toml, e.g. model.hidden=1024 (repeatable)")
    args = ap.parse_args()
    if args.short:
        args.repeats = 1
        args.top_k = 0
    load_before = os.getloadavg()
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    args.profile = args.profile or quick_profile(args.megahost, out_dir)
    ranked = {}
    for goal in GOALS:
        out = os.path.join(out_dir, goal)
        os.makedirs(out, exist_ok=True)
        ranked[goal] = tune(args.megahost, out, goal, args)
    rows = {key(r["tensor"], r["pipeline"], r["batch"]): r for r in ranked[GOALS[0]]}
    if len(rows) < 12:
        sys.exit(f"only {len(rows)} candidates fit; the brute force needs at least 12")
    configs = generate_configs(os.path.join(out_dir, GOALS[0]))
    runs = {k: [] for k in rows}
    for r in range(args.repeats):
        order = sorted(rows)
        random.Random(r).shuffle(order)
        for k in order:
            runs[k] += run_once(args.megahost, configs[k], args.prompt_len, args.output_len,
                                warm_up_batches(predicted_latency(rows[k], args.output_len)))
        print(f"round {r + 1}/{args.repeats} done", file=sys.stderr)

    out_len = args.output_len
    table = []
    for k, row in rows.items():
        ttft = statistics.median(a for a, _, _ in runs[k])
        tpot = statistics.median(b for _, b, _ in runs[k])
        latency = statistics.median(c for *_, c in runs[k])
        batch = int(row["batch"])
        ttft_pred, tpot_pred = float(row["ttft_s_predicted"]), float(row["tpot_s_predicted"])
        table.append({"candidate": k, "batch": batch, "ttft_pred": ttft_pred, "ttft": ttft, "tpot_pred": tpot_pred,
                      "tpot": tpot, "latency": latency, "spread": spread([c for *_, c in runs[k]]),
                      "tokens_per_s": batch * out_len / latency,
                      "tokens_per_s_pred": batch * out_len / (ttft_pred + out_len * tpot_pred),
                      "memory_gib": float(row["memory_gib"])})
    with open(os.path.join(out_dir, "bruteforce.csv"), "w") as f:
        f.write("candidate,ttft_s_predicted,ttft_s_measured,tpot_s_predicted,tpot_s_measured,latency_s_measured,"
                "latency_spread,tokens_per_s_predicted,tokens_per_s_measured,memory_gib\n")
        for r in table:
            f.write(f"{r['candidate']},{r['ttft_pred']:.6f},{r['ttft']:.6f},{r['tpot_pred']:.6f},{r['tpot']:.6f},"
                    f"{r['latency']:.6f},{r['spread']:.4f},{r['tokens_per_s_pred']:.1f},{r['tokens_per_s']:.1f},"
                    f"{r['memory_gib']:.3f}\n")
    print(f"{'candidate':18s} {'TTFT pred s':>11s} {'measured':>9s} {'err':>6s} {'TPOT pred ms':>12s} {'measured':>9s} "
          f"{'err':>6s} {'spread':>7s} {'tok/s pred':>10s} {'tok/s meas':>10s}")
    for r in sorted(table, key=lambda r: r["latency"]):
        print(f"{r['candidate']:18s} {r['ttft_pred']:11.4f} {r['ttft']:9.4f} {100 * (r['ttft_pred'] / r['ttft'] - 1):5.0f}% "
              f"{1e3 * r['tpot_pred']:12.3f} {1e3 * r['tpot']:9.3f} {100 * (r['tpot_pred'] / r['tpot'] - 1):5.0f}% "
              f"{100 * r['spread']:6.1f}% {r['tokens_per_s_pred']:10.0f} {r['tokens_per_s']:10.0f}")
    print(f"\nmedians of {BATCHES * args.repeats} batches per candidate ({args.repeats} run(s) of a warm-up and {BATCHES}, the "
          f"warm-up batches of each run, its first {WARM_UP_SECONDS} s as predicted, discarded); spread: half the latencies' interquartile range over their median")
    print(f"profile: {args.profile}")
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f on %d CPUs"
          % (*load_before, *os.getloadavg(), os.cpu_count()))
    fidelity = []
    medians = []
    for what in ("ttft", "tpot"):
        errors = [abs(r[what + "_pred"] / r[what] - 1) * 100 for r in table]
        medians.append(statistics.median(errors))
        fidelity.append((what.upper(), len(table), statistics.median(errors), max(errors), None))
    by_key = {r["candidate"]: r for r in table}
    worst = 0.0
    for goal, measure, better in (("inference_latency", "latency", min), ("inference_throughput", "tokens_per_s", max)):
        best = better(table, key=lambda r: r[measure])
        predicted = (min(ranked[goal], key=lambda r: predicted_latency(r, out_len)) if measure == "latency"
                     else max(ranked[goal], key=lambda r: float(r["tokens_per_s_predicted"])))
        picks = [("cost model", predicted)] + ([(f"top_k = {args.top_k} measured", ranked[goal][0])] if args.top_k else [])
        for how, top in picks:
            pick = by_key[key(top["tensor"], top["pipeline"], top["batch"])]
            gap = 100 * (pick["latency"] / best["latency"] - 1 if measure == "latency"
                         else best["tokens_per_s"] / pick["tokens_per_s"] - 1)
            print(f"{goal}, {how}: the pick {pick['candidate']} ({measure} {pick[measure]:.4g} measured); fastest "
                  f"measured {best['candidate']} ({best[measure]:.4g}); the pick is {gap:.1f}% behind")
            fidelity.append((f"{goal} pick ({how})", len(table), None, None, gap))
        worst = max(worst, fidelity[-1][4])  # the tuner's pick: re-ranked when top_k ran
    print()
    print(fidelity_table(fidelity))
    failed = worst > args.max_pick_behind or (args.max_median_error is not None and
                                              max(medians) > args.max_median_error)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
