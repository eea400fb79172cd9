"""The distributed optimizer's parameter all-gather overlapped with the next
forward (parallel.data.overlap_param_gather) against gathering at the end of
the step: DP = 2 thread ranks, same model, same run, alternating the two so
that machine load hits both alike. Prints the median step time and the
seconds per step rank 0 was blocked on the gather (param_gather_wait_s:
the whole gather without overlap, what the forward still waited for with
it), and the load average around the runs.

    python3 bench/param_gather_overlap.py [--steps 8] [--repeats 3] [--bucket_mb 1]
"""
import argparse
import os

from megahost_run import SINGLE, median_of, run

MODEL = "model.layers=8 model.hidden=512 model.heads=8 model.seq_len=128 train.micro_batch=4 train.global_batch=8"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bucket_mb", type=float, default=1.0)
    ap.add_argument("--extra", default="", help="more overrides, e.g. kernels.dtype=bf16")
    args = ap.parse_args()
    base = (f"{SINGLE} {MODEL} comm.world_size=2 parallel.data.bucket_mb={args.bucket_mb} "
            f"parallel.data.distributed_optimizer=true {args.extra}")
    layouts = {"off": "parallel.data.overlap_param_gather=false", "on": "parallel.data.overlap_param_gather=true"}
    keys = ("step_s", "param_gather_wait_s")
    figures = {name: {k: [] for k in keys} for name in layouts}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for name, flags in layouts.items():
            records, _ = run(f"{base} {flags}", args.steps)
            for k in keys:
                figures[name][k].append(median_of(records, k))
    load_after = os.getloadavg()
    mid = lambda values: sorted(values)[len(values) // 2]
    print(f"DP=2 thread ranks, distributed optimizer, {MODEL}, bucket_mb={args.bucket_mb} {args.extra}".rstrip())
    print(f"load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores")
    for name in layouts:
        f = {k: mid(v) for k, v in figures[name].items()}
        print(f"overlap {name:3}  step {f['step_s']:.3f} s  blocked on the parameter gather "
              f"{f['param_gather_wait_s'] * 1e3:7.2f} ms")
    on, off = (mid(figures[n]["param_gather_wait_s"]) for n in ("on", "off"))
    print(f"gather hidden: {100 * (1 - on / off):.0f}% of the blocking gather's wait")
    print(f"step time on / off: {mid(figures['on']['step_s']) / mid(figures['off']['step_s']):.3f}")


if __name__ == "__main__":
    main()
