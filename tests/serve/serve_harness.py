"""Runs megahost for the serving tests: trains the small test model once,
generates with [generate], and starts servers with [serve] on 127.0.0.1 and
a free port, stopping them with SIGTERM (or killing them) at the end."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ARGS = None
SCRATCH = None


def parse_args():
    global ARGS, SCRATCH
    p = argparse.ArgumentParser()
    p.add_argument("--megahost", required=True)
    p.add_argument("--config", required=True, help="the small test model's TOML")
    ARGS, rest = p.parse_known_args()
    SCRATCH = tempfile.mkdtemp(prefix="megahost_serve_")
    return [sys.argv[0]] + rest


def cleanup():
    shutil.rmtree(SCRATCH, ignore_errors=True)


def megahost(args, **kw):
    return subprocess.run([ARGS.megahost, "--config", ARGS.config] + args, capture_output=True, text=True, **kw)


MODEL = ["model.dropout=0", "model.attention_dropout=0"]


def train(name, extra=(), steps=150):
    """A checkpoint of the small model trained for a little while (an untrained
    model repeats one token, which would hide a wrong token)."""
    ckpt = os.path.join(SCRATCH, name)
    r = megahost(MODEL + list(extra) + [f"train.steps={steps}", "train.lr=3e-3", f"checkpoint.dir={ckpt}"])
    assert r.returncode == 0, r.stderr[-3000:]
    return ["checkpoint.load=auto", f"checkpoint.dir={ckpt}"] + MODEL + list(extra)


def generate(model, prompts, max_new_tokens, extra=()):
    """[generate]'s completions of `prompts` (token ids and text)."""
    path = os.path.join(SCRATCH, f"prompts_{time.monotonic_ns()}.jsonl")
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p}) + "\n")
    metrics = path + ".metrics.jsonl"
    r = megahost(model + list(extra) + [f"generate.prompts_file={path}", f"generate.max_new_tokens={max_new_tokens}",
                                       "generate.batch=4", f"--metrics_out={metrics}"])
    assert r.returncode == 0, r.stderr[-3000:]
    out = []
    with open(metrics) as f:
        for line in f:
            rec = json.loads(line)
            if "request" in rec:
                out.append(rec)
    return out


class Server:
    """megahost with [serve] on 127.0.0.1 and a free port."""

    def __init__(self, model, extra=(), ready=True):
        self.log = open(os.path.join(SCRATCH, f"server_{time.monotonic_ns()}.log"), "w+")
        self.proc = subprocess.Popen(
            [ARGS.megahost, "--config", ARGS.config] + model + ["serve.host=127.0.0.1", "serve.port=0"] + list(extra),
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("serving "), f"no 'serving' line: {line!r}; log:\n{self.logs()}"
        self.port = int(line.rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"
        if ready:
            self.wait_ready()

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, _ = self.get("/health")
            if status == 200:
                return
            assert self.proc.poll() is None, self.logs()
            time.sleep(0.05)
        raise AssertionError("the server did not become ready:\n" + self.logs())

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-5000:]

    def request(self, method, path, body=None, headers=None):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def get(self, path):
        try:
            return self.request("GET", path)
        except (ConnectionError, urllib.error.URLError):
            return 0, ""

    def post(self, path, body, headers=None):
        return self.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})

    def metric(self, name):
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def stop(self, timeout=60):
        """SIGTERM: the server drains and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the server did not stop on SIGTERM:\n" + self.logs())
        self.proc.stdout.close()
        return status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
