"""Sequence parallelism against plain tensor parallelism, same model, same
run: TP = 2 with SP against TP = 2 without, on 2 thread ranks. Prints the
step-time ratio and each rank's activation memory beside the formula.

    python3 bench/sequence_parallel.py [--steps 8] [--repeats 3]
"""
import argparse

from megahost_run import SINGLE, median_of, run

MODEL = "model.layers=4 model.hidden=512 model.heads=8 model.seq_len=256 train.micro_batch=4 train.global_batch=8"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    layouts = {"tp2": "parallel.tensor.sequence_parallel=false",
               "tp2+sp": "parallel.tensor.sequence_parallel=true"}
    times = {k: [] for k in layouts}
    memory = {}
    for _ in range(args.repeats):
        for name, flags in layouts.items():
            records, final = run(f"{SINGLE} {MODEL} comm.world_size=2 parallel.tensor.size=2 {flags}", args.steps)
            times[name].append(median_of(records, "step_s"))
            memory[name] = final["memory"][0]
    for name in layouts:
        t = sorted(times[name])[len(times[name]) // 2]
        m = memory[name]
        print(f"{name:7} step {t:.3f} s  activations {m['activations'] / 2**20:7.2f} MiB "
              f"(formula {m['activations_formula'] / 2**20:7.2f} MiB)")
    ratio = sorted(times["tp2+sp"])[args.repeats // 2] / sorted(times["tp2"])[args.repeats // 2]
    print(f"SP / no-SP step time: {ratio:.3f}   activation memory: "
          f"{memory['tp2+sp']['activations'] / memory['tp2']['activations']:.3f}")


if __name__ == "__main__":
    main()
