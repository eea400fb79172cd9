"""A checkpoint is readable with the ecosystem's own safetensors package:
every rank file opens with safetensors.numpy, every slice the index lists is
there with its shape, and the global tensors assembled from a checkpoint
saved on two tensor-parallel ranks equal those saved on one rank.
(Not Megahost's own reader: an independent check of the format.)"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    sys.exit(f"missing Python package ({e}); run scripts/install-deps.sh (the tests' Python environment)")


def save(binary, config, directory, overrides):
    # Learning rate 0: the weights stay at their initial values, which are keyed
    # by global position, so any misplaced slice shows as a difference.
    subprocess.run([binary, "--config", config, "train.steps=2", "train.lr=0", "train.min_lr=0",
                    f"checkpoint.dir={directory}", *overrides],
                   check=True, capture_output=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    step = os.path.join(directory, "step_000000002")
    with open(os.path.join(step, "metadata.json")) as f:
        return step, json.load(f)


def assemble(step, meta):
    files = {name: load_file(os.path.join(step, name)) for name in meta["files"]}
    tensors = {}
    for name, entry in meta["tensors"].items():
        full = np.full(entry["shape"], np.nan, dtype=np.float32)
        for s in entry["slices"]:
            part = files[s["file"]][s["key"]]
            assert list(part.shape) == s["shape"], (name, s["key"], part.shape, s["shape"])
            r, c = s["offset"]
            full[r:r + part.shape[0], c:c + part.shape[1]] = part
        assert not np.isnan(full).any(), f"{name}: slices leave elements uncovered"
        tensors[name] = full
    return tensors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megahost", required=True)
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = assemble(*save(a.megahost, a.config, os.path.join(tmp, "one"), ["comm.world_size=1"]))
        two = assemble(*save(a.megahost, a.config, os.path.join(tmp, "tp2"),
                             ["comm.world_size=2", "parallel.tensor.size=2", "parallel.tensor.sequence_parallel=true"]))
    assert one.keys() == two.keys(), set(one) ^ set(two)
    worst = {"weights": 0.0, "moments": 0.0}
    for name in one:
        scale = max(float(np.abs(one[name]).max()), 1e-30)
        kind = "moments" if name.startswith("optimizer.") else "weights"
        worst[kind] = max(worst[kind], float(np.abs(one[name] - two[name]).max()) / scale)
    print(f"{len(one)} global tensors read with safetensors.numpy; TP2 vs one rank, max relative difference: "
          f"weights {worst['weights']:.2e}, AdamW moments {worst['moments']:.2e}")
    # Weights exactly; the moments are running moments of the gradients, held
    # as the layout tests hold gradients.
    assert worst["weights"] == 0 and worst["moments"] <= 1e-4, worst


if __name__ == "__main__":
    main()
