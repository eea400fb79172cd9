"""Checkpoint save and load bandwidth against the disk's, and the stall of
an asynchronous save against a synchronous one's, in one run.

  python3 bench/checkpoint_io.py [--dir /var/tmp/megahost-ckpt-bench] [--reps 3]

The model is GPT-2 "small" (124M parameters; research/baselines.md), saved
with AdamW's moments: 1.49 GB in f32. On the same folder it measures:
  disk write   a file of the checkpoint's size written in 64 MiB blocks, fsynced
  disk read    that file read back after dropping the page cache (when
               /proc/sys/vm/drop_caches is writable; else cached, and said so),
               the faster of read() calls and a mapping read in whole
  save         megahost's synchronous save (one rank; two tensor-parallel
               ranks writing in parallel)
  load         megahost resuming from it, page cache dropped likewise (cold),
               then again with the files cached (warm); with the CPU
               seconds the process spent loading and the load average
  stall        checkpoint_stall_s of async saves vs synchronous ones
Figures are medians over --reps; ratios are what to quote (the disk varies).
"""
import argparse
import json
import mmap
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megahost_run import BINARY, CONFIG, SINGLE, SMALL  # noqa: E402

SMALL_ONE_SAMPLE = SMALL.replace("train.micro_batch=4 train.global_batch=4", "train.micro_batch=1 train.global_batch=1") \
    .replace("model.seq_len=256", "model.seq_len=64")


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def disk_write(path, nbytes):
    block = os.urandom(64 << 20)
    start = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            left -= f.write(block[:min(left, len(block))])
        f.flush()
        os.fsync(f.fileno())
    return nbytes / (time.perf_counter() - start)


def disk_read(path):
    """The disk's read bandwidth: the faster of 64 MiB read() calls and a
    mapping read in whole (the kernel's requests, as megahost's load reads)."""
    dropped = drop_caches()
    start = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(64 << 20):
            n += len(chunk)
    by_read = n / (time.perf_counter() - start)
    dropped &= drop_caches()
    start = time.perf_counter()
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
        by_map = len(m) / (time.perf_counter() - start)
        m.close()
    return max(by_read, by_map), dropped


def megahost(args, env_threads=None):
    env = dict(os.environ)
    if env_threads:
        env["OMP_NUM_THREADS"] = str(env_threads)
    cmd = [BINARY, "--config", CONFIG, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc.stderr


def save_once(folder, layout):
    shutil.rmtree(folder, ignore_errors=True)
    log = megahost([*SINGLE.split(), *SMALL_ONE_SAMPLE.split(), *layout, "train.steps=1", f"checkpoint.dir={folder}"])
    m = re.search(r"saved checkpoint \S+: \d+ file\(s\), ([\d.e+]+) MiB in ([\d.e+-]+) s", log)
    return float(m.group(1)) * (1 << 20), float(m.group(2))


def load_once(folder, cold=True):
    """(wall seconds, CPU seconds, whether the page cache was dropped)"""
    dropped = cold and drop_caches()
    log = megahost([*SINGLE.split(), *SMALL_ONE_SAMPLE.split(), "train.steps=2", f"checkpoint.load={folder}"])
    m = re.search(r"resumed from \S+ in ([\d.e+-]+) s \(([\d.e+-]+) s CPU\)", log)
    return float(m.group(1)), float(m.group(2)), dropped


def stalls(folder, asynchronous):
    shutil.rmtree(folder, ignore_errors=True)
    metrics = folder + ".jsonl"
    # The full "small" step (4 x 256 tokens) outlasts the background write,
    # as training steps between saves do, so the stall is the snapshot's.
    megahost([*SINGLE.split(), *SMALL.split(), "train.steps=4", f"checkpoint.dir={folder}",
              "checkpoint.interval=1", "checkpoint.keep=1", f"checkpoint.async={'true' if asynchronous else 'false'}",
              "--metrics_out", metrics])
    values = [json.loads(l)["checkpoint_stall_s"] for l in open(metrics) if "checkpoint_stall_s" in l]
    os.remove(metrics)
    return statistics.median(values[:-1])  # the last save waits for itself at the end of the run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/megahost-ckpt-bench")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    ck = os.path.join(a.dir, "ck")
    rows = {k: [] for k in ("write", "read", "save1", "save2", "load", "warm")}
    cpu = {"load": [], "warm": []}
    loadavg = [os.getloadavg()[0]]
    dropped_all = True
    for _ in range(a.reps):
        nbytes, seconds = save_once(ck, ["comm.world_size=1"])
        rows["save1"].append(nbytes / seconds)
        raw = os.path.join(a.dir, "raw.bin")
        rows["write"].append(disk_write(raw, int(nbytes)))
        bw, dropped = disk_read(raw)
        rows["read"].append(bw)
        os.remove(raw)
        load_s, load_cpu, dropped2 = load_once(ck)
        rows["load"].append(nbytes / load_s)
        cpu["load"].append(load_cpu)
        warm_s, warm_cpu, _ = load_once(ck, cold=False)
        rows["warm"].append(nbytes / warm_s)
        cpu["warm"].append(warm_cpu)
        dropped_all &= dropped and dropped2
        nbytes2, seconds2 = save_once(ck + "2", ["comm.world_size=2", "parallel.tensor.size=2"])
        rows["save2"].append(nbytes2 / seconds2)
    sync_stall, async_stall = stalls(ck + "s", False), stalls(ck + "a", True)
    loadavg.append(os.getloadavg()[0])
    med = {k: statistics.median(v) / 1e6 for k, v in rows.items()}
    print(f"checkpoint of GPT-2 small with AdamW moments: {nbytes / 1e9:.2f} GB, folder {a.dir}, "
          f"median of {a.reps}; page cache {'dropped' if dropped_all else 'NOT dropped (reads are cached)'}")
    print(f"{'':34}{'MB/s':>10}{'of disk':>10}")
    print(f"{'disk sequential write (fsync)':34}{med['write']:10.0f}")
    print(f"{'disk sequential read':34}{med['read']:10.0f}")
    print(f"{'save, 1 rank':34}{med['save1']:10.0f}{med['save1'] / med['write']:10.2f}")
    print(f"{'save, 2 ranks (TP2) in parallel':34}{med['save2']:10.0f}{med['save2'] / med['write']:10.2f}")
    print(f"{'load, 1 rank (checksums verified)':34}{med['load']:10.0f}{med['load'] / med['read']:10.2f}"
          f"   {statistics.median(cpu['load']):.2f} s CPU")
    print(f"{'load, 1 rank, files cached':34}{med['warm']:10.0f}{'':10}"
          f"   {statistics.median(cpu['warm']):.2f} s CPU")
    print(f"training stall per save: synchronous {sync_stall:.3f} s, asynchronous {async_stall:.3f} s "
          f"({100 * async_stall / sync_stall:.1f}% of synchronous)")
    print(f"load average (1 min) {loadavg[0]:.2f} at the start, {loadavg[1]:.2f} at the end, on {os.cpu_count()} CPUs")
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
