"""The tuner against brute force on this machine.

Tunes bench/tuner_small.toml on a hardware profile (by default a fresh
`megahost --calibrate quick` of this machine), then trains every candidate
that fits with the real engine -- in shuffled rounds, each candidate's time
the median of its steps after the first over all rounds -- and prints the
cost model's error per candidate and the fidelity table: median and max
prediction error and how far the tuner's pick is behind the fastest measured
candidate (the pass mark: 5%; --max-median-error adds a bound on the error).
"""
import argparse
import csv
import json
import os
import random
import statistics
import sys
import tempfile

from tuner_bench import CONFIG, ROOT, fidelity_table, megahost, quick_profile




def tune(binary, out, devices, profile):
    megahost(binary, ["--config", CONFIG, f"output.dir={out}", "tuner.plugin=grid", f"tuner.cluster={profile}",
                      f"tuner.gpus_per_node={devices}"])
    with open(os.path.join(out, "ranked.csv")) as f:
        return list(csv.DictReader(f))


def overrides(c):
    t, p, v, d = (int(c[k]) for k in ("tensor", "pipeline", "virtual_stages", "data"))
    o = [f"parallel.tensor.size={t}", f"parallel.tensor.sequence_parallel={c['sequence_parallel']}",
         f"parallel.pipeline.size={p}", f"parallel.pipeline.virtual_stages={v}",
         f"parallel.pipeline.schedule={'interleaved' if v > 1 else '1f1b'}", f"train.micro_batch={c['micro_batch']}",
         f"recompute.plugin={c['recompute']}", f"comm.world_size={t * p * d}"]
    if c["recompute"] == "full":
        o += ["recompute.method=uniform", f"recompute.num_layers={c['recompute_layers']}"]
    return o


def steps_after_first(binary, c, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        megahost(binary, ["--config", CONFIG, "--metrics_out", metrics, f"train.steps={steps}", *overrides(c)])
        return [r["step_s"] for r in map(json.loads, open(metrics)) if "step_s" in r and r["step"] > 1]






def name(c):
    full = f"/{c['recompute_layers']}" if c["recompute"] == "full" else ""
    sp = " sp" if c["sequence_parallel"] == "true" else ""
    return f"t={c['tensor']} p={c['pipeline']} v={c['virtual_stages']} d={c['data']}{sp} b={c['micro_batch']} " \
           f"{c['recompute']}{full}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megahost", default=os.path.join(ROOT, "build", "bin", "megahost"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tuner_bruteforce_out"))
    ap.add_argument("--profile", help="the tuner's cluster (a profile name or .toml file); default: a fresh "
                                      "`megahost --calibrate quick` of this machine")
    ap.add_argument("--devices", type=int, default=2, help="thread ranks (the tuner's gpus_per_node)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--short", action="store_true",
                    help="CI's check: one round of 3 steps over 12 candidates spread over the ranking")
    ap.add_argument("--max-median-error", type=float, help="also fail when the median error exceeds this, percent")
    ap.add_argument("--max-pick-behind", type=float, default=5.0, help="fail when the pick is further behind, percent")
    args = ap.parse_args()
    if args.short:
        args.rounds, args.steps = 1, 3
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    load_before = os.getloadavg()
    profile = args.profile or quick_profile(args.megahost, out)
    candidates = tune(args.megahost, out, args.devices, profile)
    if len(candidates) < 12:
        sys.exit(f"only {len(candidates)} candidates fit; the brute force needs at least 12")
    if args.short:  # the pick and 11 others spread over the ranking
        step = (len(candidates) - 1) / 11
        candidates = [candidates[round(i * step)] for i in range(12)]
    measured = {name(c): [] for c in candidates}
    for r in range(args.rounds):
        order = candidates[:]
        random.Random(r).shuffle(order)
        for c in order:
            measured[name(c)] += steps_after_first(args.megahost, c, args.steps)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = []
    for c in candidates:
        pred, meas = float(c["step_s_predicted"]), statistics.median(measured[name(c)])
        rows.append((name(c), pred, meas, 100 * (pred / meas - 1)))
    errors = [abs(e) for *_, e in rows]
    pick = min(rows, key=lambda r: r[1])
    best = min(rows, key=lambda r: r[2])
    gap = 100 * (pick[2] / best[2] - 1)
    with open(os.path.join(out, "bruteforce.csv"), "w") as f:
        f.write("candidate,predicted_s,measured_s,error_percent\n")
        for n, p_, m, e in rows:
            f.write(f"{n},{p_:.5f},{m:.5f},{e:.1f}\n")
    print(f"{'candidate':40s} {'predicted s':>11s} {'measured s':>11s} {'error':>7s}")
    for n, p_, m, e in sorted(rows, key=lambda r: r[2]):
        print(f"{n:40s} {p_:11.4f} {m:11.4f} {e:6.1f}%")
    # A busy machine slows every candidate by a similar factor; what decides
    # the pick is the error left once that common factor is taken out.
    scale = statistics.median(m / p_ for _, p_, m, _ in rows)
    relative = [abs(p_ * scale / m - 1) * 100 for _, p_, m, _ in rows]
    print(f"\nmeasured/predicted: median {scale:.2f}; error of predicted x {scale:.2f}: median "
          f"{statistics.median(relative):.1f}%, max {max(relative):.1f}%")
    print(f"profile: {profile}")
    # Other work on the machine slows every candidate unevenly; say how busy it was.
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f on %d CPUs"
          % (*load_before, *os.getloadavg(), os.cpu_count()))
    print(f"tuner's pick: {pick[0]} ({pick[2]:.4f} s measured); fastest measured: {best[0]} ({best[2]:.4f} s)\n")
    print(fidelity_table([(f"training step, {args.devices} ranks", len(rows), statistics.median(errors), max(errors),
                           gap)]))
    failed = gap > args.max_pick_behind or (args.max_median_error is not None and
                                            statistics.median(errors) > args.max_median_error)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
