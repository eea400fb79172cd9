"""scripts/plot_metrics.py writes a PNG of a metrics file's loss curves (every
training run in the file, or --last; an --evaluate run has none), and names
the file and line of a record that is not JSON."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "plot_metrics.py")


def plot(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as work:
        metrics, png = os.path.join(work, "m.jsonl"), os.path.join(work, "loss.png")
        with open(metrics, "w") as f:
            for run in range(2):
                f.write(json.dumps({"run": {"pid": run}}) + "\n")
                for step in range(1, 5):
                    f.write(json.dumps({"step": step, "loss": 6.0 - step / (run + 1)}) + "\n")
                f.write(json.dumps({"step": 4, "val_loss": 4.5}) + "\n")
            # An --evaluate run appended to the file: nothing to plot.
            f.write(json.dumps({"run": {"pid": 2}}) + "\n")
            f.write(json.dumps({"evaluate": "valid", "loss": 4.4, "perplexity": 81.5}) + "\n")
        for extra in ([], ["--last"]):
            done = plot(metrics, "-o", png, *extra)
            assert done.returncode == 0, done.stderr
            with open(png, "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
            assert os.path.getsize(png) > 10000, os.path.getsize(png)
            os.remove(png)
        with open(metrics, "a") as f:
            f.write("not json\n")
        done = plot(metrics, "-o", png)
        assert done.returncode != 0 and f"{metrics}:15: not a JSON record" in done.stderr, done.stderr
        assert not os.path.exists(png)
    print("plot_metrics.py: PNGs written, a bad record named")


if __name__ == "__main__":
    main()
