"""A run with output.tensorboard_dir writes event files that TensorBoard's own
reader (EventAccumulator, from the tensorboard package) loads: one scalar per
step for loss, lr, grad norm, throughput and memory, the validation losses,
and the configuration as text; the losses equal the metrics file's.
(Not Megahost's own reader: an independent check of the format.)"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    sys.exit(f"missing Python package ({e}); run scripts/install-deps.sh (the tests' Python environment)")

STEPS = 4


def run(binary, config, work):
    board, metrics = os.path.join(work, "board"), os.path.join(work, "metrics.jsonl")
    subprocess.run([binary, "--config", config, f"train.steps={STEPS}", "train.eval_interval=2",
                    "train.eval_batches=1", f"output.tensorboard_dir={board}", "--metrics_out", metrics],
                   check=True, capture_output=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    with open(metrics) as f:
        records = [json.loads(line) for line in f]
    return board, records


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megahost", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        board, records = run(args.megahost, args.config, work)
        files = [f for f in os.listdir(board) if f.startswith("events.out.tfevents.")]
        assert len(files) == 1, files
        events = EventAccumulator(board, size_guidance={"scalars": 0, "tensors": 0})
        events.Reload()
        tags = events.Tags()
        for tag in ("train/loss", "train/lr", "train/grad_norm", "throughput/tokens_per_s",
                    "throughput/tflops_per_device", "memory/peak_mib"):
            steps = [e.step for e in events.Scalars(tag)]
            assert steps == list(range(1, STEPS + 1)), (tag, steps, tags)
        losses = [e.value for e in events.Scalars("train/loss")]
        expected = [r["loss"] for r in records if "loss" in r]
        assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(losses, expected, strict=True)), (losses, expected)
        validation = [(e.step, e.value) for e in events.Scalars("validation/loss")]
        expected = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
        assert [s for s, _ in validation] == [s for s, _ in expected] == [2, 4], (validation, expected)
        assert all(e.value > 0 for e in events.Scalars("memory/peak_mib"))
        config = events.Tensors("config")
        assert len(config) == 1, tags
        text = config[0].tensor_proto.string_val[0].decode()
        assert "[model]" in text and "hidden = 64" in text, text
    print("TensorBoard's EventAccumulator read every tag: " + ", ".join(sorted(tags["scalars"])))


if __name__ == "__main__":
    main()
