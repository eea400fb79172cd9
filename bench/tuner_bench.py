"""What the two tuner brute forces share: the small model they tune, running
megahost, a fresh quick calibration and the fidelity report's table."""
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "bench", "tuner_small.toml")


def exit_status(returncode):
    """A subprocess's return code as words: a negative one is the signal that killed it."""
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


def megahost(binary, args):
    # Bytes, not text: an untrained model's completions are arbitrary bytes.
    proc = subprocess.run([binary, *args], capture_output=True)
    if proc.returncode != 0:
        sys.exit(f"megahost {' '.join(args)} failed ({exit_status(proc.returncode)}):\n"
                 f"{proc.stderr[-3000:].decode(errors='replace')}")


def quick_profile(binary, out):
    """A fresh quick calibration of this machine, timed."""
    profile = os.path.join(out, "local_cpu_quick.toml")
    start = time.time()
    megahost(binary, ["--config", CONFIG, "--calibrate", "quick", "--calibrate_out", profile])
    print(f"--calibrate quick: {time.time() - start:.0f} s", file=sys.stderr)
    return profile


def fidelity_table(rows):
    """The fidelity report's table: rows of (what, candidates, median error %, max error %, pick behind %),
    None where a row has no such figure."""
    cell = lambda v: "-" if v is None else f"{v:.1f}%"
    lines = ["| what | candidates | median error | max error | pick behind the fastest measured |",
             "|---|---|---|---|---|"]
    for what, n, med, mx, gap in rows:
        lines.append(f"| {what} | {n} | {cell(med)} | {cell(mx)} | {cell(gap)} |")
    return "\n".join(lines)
