"""Blended datasets as Megatron blends them: three datasets written by the
independent numpy writer (megatron_format.py), with disjoint token ids so a
sample shows which dataset it came from, blended by data.paths weights. The
order of datasets must be exactly that of Megatron's build_blending_indices
(reimplemented here from its description), the shares must follow the
weights, and sample i must be the same whatever order the samples are read
in (as ranks of different layouts, or a resumed run, read them)."""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import megatron_format

WEIGHTS = [0.3, 0.5, 0.2]
SEQ_LEN = 8
SAMPLES = 3000


def megatron_blending(weights, size):
    """Dataset of each sample: the one whose share so far lags its weight
    the most, the first of equals, with the sample index counted from 1."""
    counts = [0] * len(weights)
    order = []
    for i in range(size):
        position = max(i, 1)
        errors = [w * position - c for w, c in zip(weights, counts)]
        best = errors.index(max(errors))
        order.append(best)
        counts[best] += 1
    return order


def read_samples(tool, paths, indices):
    result = subprocess.run([tool, "samples", paths, "1", str(SEQ_LEN)], input=json.dumps(indices),
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{tool} samples failed:\n{result.stderr}")
    return json.loads(result.stdout)["samples"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    tool = parser.parse_args().tool
    rng = random.Random(19)
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for d, weight in enumerate(WEIGHTS):
            prefix = str(Path(folder) / f"part{d}")
            # Dataset d holds ids d*1000 .. d*1000+999, in documents of 1..40 tokens.
            documents = [[[rng.randrange(d * 1000, d * 1000 + 1000) for _ in range(rng.randrange(1, 40))]]
                         for _ in range(400)]
            megatron_format.write(prefix, documents, "uint16")
            paths += [str(weight), prefix]
        blend = " ".join(paths)
        indices = list(range(SAMPLES))
        samples = read_samples(tool, blend, indices)
        sources = []
        for sample in samples:
            owners = {token // 1000 for token in sample}
            assert len(owners) == 1, f"a sample mixes datasets {owners}"
            sources.append(owners.pop())
        assert sources == megatron_blending(WEIGHTS, SAMPLES), "the order differs from Megatron's"
        for d, weight in enumerate(WEIGHTS):
            share = sources.count(d) / SAMPLES
            assert abs(share - weight) < 1e-3, f"dataset {d}: share {share}, weight {weight}"
        shuffled = indices[:]
        rng.shuffle(shuffled)
        again = dict(zip(shuffled, read_samples(tool, blend, shuffled)))
        assert all(again[i] == samples[i] for i in indices), "a sample depends on the reading order"
    print(f"blending: {SAMPLES} samples in Megatron's order, shares {WEIGHTS}, independent of reading order")


if __name__ == "__main__":
    main()
