#!/usr/bin/env python3
"""Megahost's OpenAI-compatible server against llama.cpp's (PyPI llama-cpp-python[server]) on the
same random-weight GPT-2-shaped model in f32, the same threads, in one run on the same machine:
generated tokens per second at 1, 8 and 32 concurrent streaming clients, time to first token
(TTFT) and time per output token (TPOT) percentiles, and Megahost's server TPOT under one client
against [generate]'s TPOT (the server's overhead).

  python bench/serve_vs_llamacpp.py --llama_python VENV/bin/python [--threads 2] [--clients 1,8,32]
  python bench/serve_vs_llamacpp.py --skip_llama    # Megahost alone

VENV is a virtual environment with llama-cpp-python[server] (llama.cpp built from source by pip)
and gguf; the interpreter running this script needs numpy and gguf (the same venv will do):

  python3 -m venv /tmp/llama && /tmp/llama/bin/pip install --no-binary llama-cpp-python \\
      'llama-cpp-python[server]' gguf

The model: GPT-2's architecture (learned positions, LayerNorm, GELU, tied output) with --layers,
--hidden and --heads, GPT-2's vocabulary (data/gpt2) and weights drawn from N(0, 0.02) with a fixed
seed, written as a Hugging Face folder (config.json, model.safetensors) that Megahost loads, and
as a GGUF file in f32 (PyPI gguf, the tensor names and layout llama.cpp's own converter gives
GPT-2) that llama.cpp loads.

Every client sends --requests streaming completions one after another, each a prompt of --prompt
tokens ("the the the ...", as many tokens in both tokenizers) and max_tokens --new at temperature
0. Megahost's requests carry `ignore_eos`; llama-cpp-python has no such field, and a logit bias
would add its Python logits processor to every token, so its requests carry none: the random model
does not pick the end-of-document token greedily here, and the table's token counts show that every
request ran to max_tokens on both. A request's TTFT is from sending it to its first text; its TPOT is the time from the first text to
the last over the tokens between (each server sends one event per token, Megahost merges a
token into the next event only when it ends inside a UTF-8 character). Throughput is all the
tokens generated (usage, else one per event) over the wall time of the level. Megahost serves with
max_batch = the most clients; llama-cpp-python's server runs one request at a time. The
[generate] baseline runs the same prompt and --new tokens as one request (tpot_s of
--metrics_out), the median of three runs.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("MEGAHOST", os.path.join(ROOT, "build", "bin", "megahost"))
GPT2_VOCAB = os.path.join(ROOT, "data", "gpt2")


def make_weights(layers, hidden, vocab, positions, seed=1234):
    """GPT-2's tensors under Hugging Face's names (Conv1D weights are [in, out])."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    t = {"transformer.wte.weight": normal(vocab, hidden), "transformer.wpe.weight": normal(positions, hidden),
         "transformer.ln_f.weight": np.ones(hidden, np.float32), "transformer.ln_f.bias": np.zeros(hidden, np.float32)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        for norm in ("ln_1", "ln_2"):
            t[p + norm + ".weight"] = np.ones(hidden, np.float32)
            t[p + norm + ".bias"] = np.zeros(hidden, np.float32)
        for name, fan_in, fan_out in (("attn.c_attn", hidden, 3 * hidden), ("attn.c_proj", hidden, hidden),
                                      ("mlp.c_fc", hidden, 4 * hidden), ("mlp.c_proj", 4 * hidden, hidden)):
            t[p + name + ".weight"] = normal(fan_in, fan_out)
            t[p + name + ".bias"] = np.zeros(fan_out, np.float32)
    return t


def write_hf(folder, tensors, layers, hidden, heads, vocab, positions):
    os.makedirs(folder)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": layers, "n_embd": hidden,
              "n_head": heads, "n_positions": positions, "n_ctx": positions, "vocab_size": vocab, "n_inner": None,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
              "attn_pdrop": 0.0, "bos_token_id": vocab - 1, "eos_token_id": vocab - 1, "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    # safetensors: an 8-byte header length, a JSON header of offsets, the raw little-endian data.
    header, offset = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())


def write_gguf(path, tensors, layers, hidden, heads, positions):
    """GPT-2 in GGUF as llama.cpp's convert_hf_to_gguf.py writes it: Conv1D weights transposed to
    [out, in], the tied output written out, GPT-2's BPE vocabulary and merges."""
    import gguf

    with open(os.path.join(GPT2_VOCAB, "vocab.json")) as f:
        vocab = json.load(f)
    with open(os.path.join(GPT2_VOCAB, "merges.txt")) as f:
        merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    tokens = sorted(vocab, key=vocab.get)
    w = gguf.GGUFWriter(path, "gpt2")
    w.add_name("megahost-bench")
    w.add_context_length(positions)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(4 * hidden)
    w.add_block_count(layers)
    w.add_head_count(heads)
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|endoftext|>"])
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    top = {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm"}
    for name, a in tensors.items():
        parts = name.split(".")[1:]  # without "transformer."
        if parts[0] == "h":
            layer, module, kind = parts[1], ".".join(parts[2:-1]), parts[-1]
            out = f"blk.{layer}.{names[module]}.{kind}"
            if kind == "weight" and a.ndim == 2:
                a = a.T
        else:
            out = f"{top[parts[0]]}.{parts[-1]}"
        w.add_tensor(out, np.ascontiguousarray(a))
    w.add_tensor("output.weight", np.ascontiguousarray(tensors["transformer.wte.weight"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, proc, log, timeout=600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited {proc.returncode}; its log {log}:\n" + open(log).read()[-3000:])
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"the server on port {port} did not answer {path} in {timeout} s; its log: {log}")


def stream_request(port, prompt, new, extra):
    """One streaming completion: (TTFT, TPOT or None, tokens)."""
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": new, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, **extra})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    start = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:500]}")
    first = last = None
    events = usage = 0
    for line in r:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]["completion_tokens"]
        if any(ch.get("text") for ch in chunk.get("choices", [])):
            last = time.perf_counter()
            first = first or last
            events += 1
    c.close()
    tokens = usage or events
    tpot = (last - first) / (tokens - 1) if tokens > 1 and first is not None else None
    return first - start, tpot, tokens


def load_level(port, clients, requests, prompt, new, extra):
    results, lock = [], threading.Lock()

    def client():
        for _ in range(requests):
            r = stream_request(port, prompt, new, extra)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    tokens = sum(r[2] for r in results)
    return {"clients": clients, "requests": len(results), "tokens": tokens, "wall_s": wall,
            "tokens_per_s": tokens / wall, "ttft": [r[0] for r in results], "tpot": [r[1] for r in results if r[1]]}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


class Server:
    def __init__(self, argv, port, health, log):
        self.log = log
        self.proc = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(port, health, self.proc, log)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def megahost_toml(work, folder, threads, extra):
    path = os.path.join(work, f"megahost_{len(os.listdir(work))}.toml")
    with open(path, "w") as f:
        f.write(f'[data]\ntokenizer = "gpt2"\n[checkpoint]\nload = "{folder}"\n[kernels]\nthreads = {threads}\n'
                f"[comm]\nworld_size = 1\n{extra}")
    return path


def generate_tpot(work, folder, threads, prompt, new):
    config = megahost_toml(work, folder, threads, f'[generate]\nprompt = "{prompt}"\nmax_new_tokens = {new}\n'
                                                  "temperature = 0.0\nstop_at_eod = false\n")
    metrics = os.path.join(work, "generate.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    p = subprocess.run([BINARY, "--config", config, "--metrics_out", metrics], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"megahost [generate] exited {p.returncode}:\n{p.stderr[-3000:]}")
    with open(metrics) as f:
        request = next(r for r in map(json.loads, f) if "request" in r)
    return request["tpot_s"]


def run_levels(name, port, args, levels, extra):
    rows = []
    stream_request(port, args.prompt_text, 4, extra)  # warm-up: first-touch of the weights and caches
    for clients in levels:
        r = load_level(port, clients, args.requests, args.prompt_text, args.new, extra)
        r["server"] = name
        rows.append(r)
        print(f"{name:9} {clients:3} clients: {r['tokens_per_s']:8.1f} tok/s, TTFT p50 {pct(r['ttft'], 50):.3f} s, "
              f"TPOT p50 {pct(r['tpot'], 50) * 1e3:.1f} ms ({r['tokens']} tokens in {r['wall_s']:.1f} s)", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_python", help="python of a venv with llama-cpp-python[server]")
    ap.add_argument("--skip_llama", action="store_true", help="Megahost alone")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--requests", type=int, default=2, help="requests each client sends one after another")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="max_tokens of each request")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--json_out", help="write every figure here")
    args = ap.parse_args()
    if not args.skip_llama and not args.llama_python:
        ap.error("give --llama_python (a venv with llama-cpp-python[server]) or --skip_llama")
    levels = [int(c) for c in args.clients.split(",")]
    args.prompt_text = "the" + " the" * (args.prompt - 1)
    positions = args.prompt + args.new
    vocab = 50257
    rows = []
    with tempfile.TemporaryDirectory(prefix="serve_bench_") as work:
        folder = os.path.join(work, "hf")
        tensors = make_weights(args.layers, args.hidden, vocab, positions)
        write_hf(folder, tensors, args.layers, args.hidden, args.heads, vocab, positions)
        baseline = statistics.median(generate_tpot(work, folder, args.threads, args.prompt_text, args.new)
                                     for _ in range(3))
        port = free_port()
        config = megahost_toml(work, folder, args.threads,
                               f"[serve]\nport = {port}\nmax_batch = {max(levels)}\nmax_new_tokens = {args.new}\n"
                               f"max_queue = {4 * max(levels)}\n")
        server = Server([BINARY, "--config", config], port, "/health", os.path.join(work, "megahost.log"))
        try:
            rows += run_levels("megahost", port, args, levels, {"ignore_eos": True})
        finally:
            server.stop()
        if not args.skip_llama:
            gguf_path = os.path.join(work, "model.gguf")
            write_gguf(gguf_path, tensors, args.layers, args.hidden, args.heads, positions)
            port = free_port()
            server = Server([args.llama_python, "-m", "llama_cpp.server", "--model", gguf_path, "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", str(positions), "--n_threads", str(args.threads),
                             "--n_threads_batch", str(args.threads), "--n_gpu_layers", "0",
                             "--interrupt_requests", "False"],
                            port, "/v1/models", os.path.join(work, "llama.log"))
            try:
                rows += run_levels("llama.cpp", port, args, levels, {})
            finally:
                server.stop()
    one = next(r for r in rows if r["server"] == "megahost" and r["clients"] == min(levels))
    served = pct(one["tpot"], 50)
    print(f"\nGPT-2 shape, {args.layers} layers, hidden {args.hidden}, {args.heads} heads, vocabulary {vocab}, f32; "
          f"prompt {args.prompt} tokens, max_tokens {args.new}, {args.requests} requests per client, "
          f"{args.threads} threads each\n")
    print("| server | clients | tokens | tokens/s | vs llama.cpp | TTFT p50 / p90 / p99 (s) | TPOT p50 / p90 / p99 (ms) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        other = next((o for o in rows if o["server"] != r["server"] and o["clients"] == r["clients"]), None)
        ratio = f"{r['tokens_per_s'] / other['tokens_per_s']:.2f}x" if other and r["server"] == "megahost" else ""
        ttft = " / ".join(f"{pct(r['ttft'], q):.3f}" for q in (50, 90, 99))
        tpot = " / ".join(f"{pct(r['tpot'], q) * 1e3:.1f}" for q in (50, 90, 99))
        print(f"| {r['server']} | {r['clients']} | {r['tokens']} | {r['tokens_per_s']:.1f} | {ratio} | {ttft} | {tpot} |")
    print(f"\nserver TPOT at {one['clients']} client(s), p50: {served * 1e3:.2f} ms; [generate] TPOT: "
          f"{baseline * 1e3:.2f} ms; overhead {100 * (served / baseline - 1):+.1f}%")
    if args.json_out:
        with open(args.json_out + ".tmp", "w") as f:
            json.dump({"args": vars(args), "generate_tpot_s": baseline, "levels": rows}, f, indent=1)
        os.replace(args.json_out + ".tmp", args.json_out)


if __name__ == "__main__":
    main()
