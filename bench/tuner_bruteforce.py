"""The tuner against brute force on this machine.

Tunes bench/tuner_small.toml for the local CPU profile (configs/hardware/
local_cpu.toml), then trains every candidate that fits with the real
engine -- in several rounds, each candidate's time its fastest step after
the first, so that other work on a shared machine cannot decide the result
-- and reports the cost model's error per candidate and how far the tuner's
pick is from the fastest measured candidate (the pass mark: 5%).
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "bench", "tuner_small.toml")


def megahost(binary, args):
    proc = subprocess.run([binary, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"megahost {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def tune(binary, out, devices):
    megahost(binary, ["--config", CONFIG, f"output.dir={out}", "tuner.plugin=grid", "tuner.cluster=local_cpu",
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


def fastest_step(binary, c, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        megahost(binary, ["--config", CONFIG, "--metrics_out", metrics, f"train.steps={steps}", *overrides(c)])
        times = [r["step_s"] for r in map(json.loads, open(metrics)) if "step_s" in r and r["step"] > 1]
    return min(times)


def name(c):
    full = f"/{c['recompute_layers']}" if c["recompute"] == "full" else ""
    sp = " sp" if c["sequence_parallel"] == "true" else ""
    return f"t={c['tensor']} p={c['pipeline']} v={c['virtual_stages']} d={c['data']}{sp} b={c['micro_batch']} " \
           f"{c['recompute']}{full}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megahost", default=os.path.join(ROOT, "build", "bin", "megahost"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tuner_bruteforce_out"))
    ap.add_argument("--devices", type=int, default=2, help="thread ranks (the tuner's gpus_per_node)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    load_before = os.getloadavg()
    candidates = tune(args.megahost, os.path.abspath(args.out), args.devices)
    if len(candidates) < 12:
        sys.exit(f"only {len(candidates)} candidates fit; the brute force needs at least 12")
    measured = {name(c): float("inf") for c in candidates}
    for r in range(args.rounds):
        order = candidates[:]
        random.Random(r).shuffle(order)
        for c in order:
            measured[name(c)] = min(measured[name(c)], fastest_step(args.megahost, c, args.steps))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = []
    for c in candidates:
        pred, meas = float(c["step_s_predicted"]), measured[name(c)]
        rows.append((name(c), pred, meas, 100 * (pred / meas - 1)))
    errors = [abs(e) for *_, e in rows]
    pick = min(rows, key=lambda r: r[1])
    best = min(rows, key=lambda r: r[2])
    gap = 100 * (pick[2] / best[2] - 1)
    with open(os.path.join(args.out, "bruteforce.csv"), "w") as f:
        f.write("candidate,predicted_s,measured_s,error_percent\n")
        for n, p_, m, e in rows:
            f.write(f"{n},{p_:.5f},{m:.5f},{e:.1f}\n")
    print(f"{'candidate':40s} {'predicted s':>11s} {'measured s':>11s} {'error':>7s}")
    for n, p_, m, e in sorted(rows, key=lambda r: r[2]):
        print(f"{n:40s} {p_:11.4f} {m:11.4f} {e:6.1f}%")
    print(f"\n{len(rows)} candidates; cost model error |predicted/measured - 1|: mean {statistics.mean(errors):.1f}%, "
          f"median {statistics.median(errors):.1f}%, max {max(errors):.1f}%")
    # A busy machine slows every candidate by a similar factor; what decides
    # the pick is the error left once that common factor is taken out.
    scale = statistics.median(m / p_ for _, p_, m, _ in rows)
    relative = [abs(p_ * scale / m - 1) * 100 for _, p_, m, _ in rows]
    print(f"measured/predicted: median {scale:.2f}; error of predicted x {scale:.2f}: mean "
          f"{statistics.mean(relative):.1f}%, median {statistics.median(relative):.1f}%, max {max(relative):.1f}%")
    # Other work on the machine slows every candidate unevenly; say how busy it was.
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f, after: %.2f %.2f %.2f on %d CPUs"
          % (*load_before, *os.getloadavg(), os.cpu_count()))
    print(f"tuner's pick: {pick[0]} ({pick[2]:.4f} s measured); fastest measured: {best[0]} ({best[2]:.4f} s); "
          f"the pick is {gap:.1f}% slower")
    sys.exit(0 if gap <= 5.0 else 1)


if __name__ == "__main__":
    main()
