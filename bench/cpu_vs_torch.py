#!/usr/bin/env python3
"""Megahost's CPU training step against PyTorch's, same model, same machine, same run.

For each config ("tiny", "small" of shared/research/baselines.md, and "llama_small": the "small"
shape as a Llama-style model: RMSNorm, RoPE, SwiGLU with Llama's ffn rule, 4:1 grouped-query
attention, no biases, untied output), each dtype (fp32; bf16: Megahost's kernels.dtype = "bf16"
against PyTorch's torch.autocast("cpu", dtype=torch.bfloat16), f32 master weights in both) and
each repetition:
  1. the machine's GEMM peak right now, same threads: for fp32 a short OpenBLAS sgemm loop
     (square N), for bf16 a bf16 matmul of oneDNN (the library Megahost's bf16 GEMMs run on,
     as its cpu kernels link it), f32 accumulation;
  2. Megahost (its CLI, with overrides) and the PyTorch model, in alternating order,
     each for `warmup + measured` optimizer steps in a fresh process.
The step time of a run is the median of its measured steps (warm-up steps skipped). The
table gives medians over repetitions, and the ratio torch/megahost as the median of the
per-repetition ratios (the two runs of a repetition are adjacent in time, so they met
similar machine load). GFLOP/s use the model-FLOP formula of baselines.md:
FLOPs/step = tokens * (6 N + 12 L h T), N = parameters without the positional table.

Run with a python that has torch: PyTorch 2.x for the bf16 rows (the environment that
scripts/install-deps.sh makes, named by scripts/python-env; a PyTorch 1.x runs fp32 only):
  $(scripts/python-env) bench/cpu_vs_torch.py [--configs tiny,small] [--dtypes fp32,bf16] [--reps 3]
or bench/cpu_vs_torch.sh, which also builds build-bench if needed.
"""
import argparse
import ctypes
import ctypes.util
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# baselines.md, section 2. vocab is already a multiple of 128, so Megahost's
# padding leaves it unchanged and both models have the same parameters. tiny's
# is 384, not baselines.md's 256: the byte corpus holds the end-of-document id
# 256, which a vocabulary of 256 cannot hold.
CONFIGS = {
    "tiny": dict(layers=4, hidden=256, heads=4, seq=128, batch=8, vocab=384, warmup=2, measured=5),
    "small": dict(layers=12, hidden=768, heads=12, seq=256, batch=4, vocab=50304, warmup=1, measured=3),
    "llama_small": dict(layers=12, hidden=768, heads=12, kv_heads=3, ffn=2048, seq=256, batch=4, vocab=50304,
                        warmup=1, measured=3, llama=True),
}

# AdamW as in baselines.md (llm.c's main): lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight
# decay. Both clip the gradient norm at 1.0 (Megahost always computes the norm).
LR, BETA1, BETA2, EPS, CLIP = 1e-4, 0.9, 0.999, 1e-8, 1.0


def param_count(c, with_wpe=True):
    h, L, V, T = c["hidden"], c["layers"], c["vocab"], c["seq"]
    if c.get("llama"):  # qkv, proj, gate/up/down, two RMSNorm scales; the final norm; wte and lm_head
        kv = c["kv_heads"] * h // c["heads"]
        per_layer = h * (h + 2 * kv) + h * h + 3 * h * c["ffn"] + 2 * h
        return 2 * V * h + L * per_layer + h
    per_layer = 12 * h * h + 13 * h
    n = V * h + L * per_layer + 2 * h
    return n + (T * h if with_wpe else 0)


def model_flops(c):
    tokens = c["batch"] * c["seq"]
    return tokens * (6 * param_count(c, with_wpe=False) + 12 * c["layers"] * c["hidden"] * c["seq"])


# Scheduling priority of the measured processes (--priority): on a machine shared
# with other work, a negative nice value lets them meet less of it. Both systems
# and the sgemm loop always get the same value.
PRIORITY = None


def set_priority():
    if PRIORITY is not None:
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)


def proc_cpu_s(pid):
    """User + system CPU seconds of all threads of a running process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run_child(cmd, log_path, env=None, step_file=None):
    """Runs cmd with stdout+stderr to log_path; returns (returncode, peak RSS in MiB, wall s,
    CPU s per step). While it runs, `step_file` (JSON lines) is polled: when a line with
    "step_s" appears, the child's CPU time (all threads) is read, so the difference between
    consecutive steps is the CPU time of a step, to ~10 ms. Unlike wall time, that hardly
    depends on how much of the machine other work takes (only through caches and spinning)."""
    start = time.perf_counter()
    step_cpu = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                preexec_fn=set_priority)
        seen = 0
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid != 0:
                    break
                if step_file is not None and os.path.exists(step_file):
                    with open(step_file, errors="replace") as f:
                        steps = sum(1 for line in f if '"step_s"' in line)
                    if steps > seen:
                        cpu = proc_cpu_s(proc.pid)
                        step_cpu += [cpu] * (steps - seen)  # several at once only if steps are < 20 ms
                        seen = steps
                time.sleep(0.02)
        except KeyboardInterrupt:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        if step_file is not None and os.path.exists(step_file):
            with open(step_file, errors="replace") as f:
                steps = sum(1 for line in f if '"step_s"' in line)
            if steps == seen + 1:  # the last step ended too close to the exit to be sampled:
                step_cpu.append(usage.ru_utime + usage.ru_stime)  # its end mark is the exit (close enough)
    cpu_per_step = [b - a for a, b in zip(step_cpu, step_cpu[1:]) if a is not None and b is not None]
    return proc.returncode, usage.ru_maxrss / 1024.0, time.perf_counter() - start, cpu_per_step


def tail(path, n=20):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-n:])


# ---------------------------------------------------------------- sgemm peak


def find_openblas(megahost):
    """The OpenBLAS that Megahost's cpu kernels link, else the system's."""
    plugin = os.path.join(os.path.dirname(megahost), "plugins", "mh_kernels_cpu.so")
    try:
        out = subprocess.run(["ldd", plugin], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "blas" in line and "=>" in line:
                return line.split("=>")[1].split()[0]
    except OSError:
        pass
    return ctypes.util.find_library("openblas") or "libopenblas.so.0"


def sgemm_worker(args):
    """Prints one JSON line: GFLOP/s of each of `calls` square sgemm calls (after one warm-up)."""
    lib = ctypes.CDLL(args.openblas)
    lib.openblas_set_num_threads(ctypes.c_int(args.threads))
    n = args.sgemm_n
    buf = ctypes.c_float * (n * n)
    a, b, c = buf(), buf(), buf()
    for i in range(0, n * n, 97):  # some non-zero values; timing does not depend on them
        a[i] = 0.5
        b[i] = 0.25
    row_major, no_trans = 101, 111
    lib.cblas_sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                                                     ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                                                     ctypes.c_void_p, ctypes.c_int]
    rates, cpu_rates = [], []
    for call in range(args.sgemm_calls + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        lib.cblas_sgemm(row_major, no_trans, no_trans, n, n, n, 1.0, a, n, b, n, 0.0, c, n)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if call > 0:
            rates.append(2.0 * n ** 3 / dt / 1e9)
            cpu_rates.append(2.0 * n ** 3 / dc / 1e9)
    # gflops: per wall second; gflops_per_cpu_s: per second of CPU time of all threads
    print(json.dumps({"n": n, "threads": args.threads, "gflops": rates, "gflops_per_cpu_s": cpu_rates}))


def find_onednn(megahost):
    """The oneDNN that Megahost's cpu kernels link, else the system's (None if neither)."""
    plugin = os.path.join(os.path.dirname(megahost), "plugins", "mh_kernels_cpu.so")
    try:
        out = subprocess.run(["ldd", plugin], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "libdnnl" in line and "=>" in line:
                return line.split("=>")[1].split()[0]
    except OSError:
        pass
    return ctypes.util.find_library("dnnl")


def bf16gemm_worker(args):
    """As sgemm_worker, for a square bf16 matmul of oneDNN (f32 accumulation, bf16 output), through
    its C API; its team is OpenMP's (OMP_NUM_THREADS = threads, set by the parent)."""
    lib = ctypes.CDLL(args.onednn)
    vp, n = ctypes.c_void_p, args.sgemm_n
    for name in ("dnnl_engine_create", "dnnl_stream_create", "dnnl_memory_desc_init_by_tag", "dnnl_matmul_desc_init",
                 "dnnl_primitive_desc_create", "dnnl_primitive_create", "dnnl_memory_create",
                 "dnnl_primitive_execute", "dnnl_stream_wait", "dnnl_primitive_desc_query",
                 "dnnl_memory_get_data_handle"):
        getattr(lib, name).restype = ctypes.c_int

    def ok(status, what):
        if status != 0:
            raise SystemExit(f"oneDNN {what} failed: status {status}")

    engine, stream = vp(), vp()
    ok(lib.dnnl_engine_create(ctypes.byref(engine), 1, ctypes.c_size_t(0)), "engine")  # dnnl_cpu
    ok(lib.dnnl_stream_create(ctypes.byref(stream), engine, 1), "stream")  # in order
    dims = (ctypes.c_int64 * 12)(n, n)
    descs = [ctypes.create_string_buffer(4096) for _ in range(3)]  # dnnl_memory_desc_t, opaque here
    for d in descs:
        ok(lib.dnnl_memory_desc_init_by_tag(d, 2, dims, 2, 3), "memory desc")  # bf16, tag ab
    op = ctypes.create_string_buffer(16384)  # dnnl_matmul_desc_t
    ok(lib.dnnl_matmul_desc_init(op, descs[0], descs[1], None, descs[2]), "matmul desc")
    pd, prim = vp(), vp()
    ok(lib.dnnl_primitive_desc_create(ctypes.byref(pd), op, None, engine, None), "primitive desc")
    ok(lib.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive")
    impl = ctypes.c_char_p()
    lib.dnnl_primitive_desc_query(pd, 8, 0, ctypes.byref(impl))  # dnnl_query_impl_info_str
    mems = [vp() for _ in range(3)]
    for m, d in zip(mems, descs):
        ok(lib.dnnl_memory_create(ctypes.byref(m), d, engine, vp(ctypes.c_size_t(-1).value)), "memory")
        # Written before timing: pages never written all map the kernel's one zero page, which
        # stays in cache; a 2048^3 AMX matmul over them ran at twice its rate over written
        # operands (2,676 against 1,312-1,416 GFLOP/s, 2 threads), a peak no model reaches.
        data = vp()
        ok(lib.dnnl_memory_get_data_handle(m, ctypes.byref(data)), "data handle")
        ctypes.memset(data, 0x3F, 2 * n * n)  # bf16 0x3f3f, about 0.75

    class ExecArg(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_int), ("memory", vp)]

    exec_args = (ExecArg * 3)(ExecArg(1, mems[0]), ExecArg(33, mems[1]), ExecArg(17, mems[2]))
    rates, cpu_rates = [], []
    for call in range(args.sgemm_calls + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        ok(lib.dnnl_primitive_execute(prim, stream, 3, exec_args), "execute")
        ok(lib.dnnl_stream_wait(stream), "wait")
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if call > 0:
            rates.append(2.0 * n ** 3 / dt / 1e9)
            cpu_rates.append(2.0 * n ** 3 / dc / 1e9)
    print(json.dumps({"n": n, "threads": args.threads, "impl": (impl.value or b"").decode(), "gflops": rates,
                      "gflops_per_cpu_s": cpu_rates}))


def measure_peak(args, raw_dir, tag, dtype):
    """The GEMM peak a run of `dtype` is compared with: OpenBLAS sgemm, or oneDNN's bf16 matmul."""
    if dtype == "fp32":
        return measure_sgemm(args, raw_dir, tag)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "bf16gemm", "--onednn", args.onednn,
           "--threads", str(args.threads), "--sgemm_n", str(args.sgemm_n), "--sgemm_calls", str(args.sgemm_calls)]
    log = os.path.join(raw_dir, f"bf16gemm-{tag}.log")
    rc, _, _, _ = run_child(cmd, log, env=child_env(args))
    if rc != 0:
        raise SystemExit(f"bf16 matmul helper failed (rc {rc}):\n{tail(log)}")
    with open(log) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def measure_sgemm(args, raw_dir, tag):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "sgemm", "--openblas", args.openblas,
           "--threads", str(args.threads), "--sgemm_n", str(args.sgemm_n), "--sgemm_calls", str(args.sgemm_calls)]
    log = os.path.join(raw_dir, f"sgemm-{tag}.log")
    rc, _, _, _ = run_child(cmd, log, env=child_env(args))
    if rc != 0:
        raise SystemExit(f"sgemm helper failed (rc {rc}):\n{tail(log)}")
    with open(log) as f:
        return json.loads(f.read().strip().splitlines()[-1])


# ---------------------------------------------------------------- PyTorch


def torch_worker(args):
    """Trains the PyTorch model for args.steps steps; one JSON line per step on stdout."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    c = CONFIGS[args.config]
    L, h, H, T, B, V = c["layers"], c["hidden"], c["heads"], c["seq"], c["batch"], c["vocab"]
    D = h // H

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x, mask):
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, h)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(T, h)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.lnf = nn.LayerNorm(h)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:  # GPT-2's scaled init of the residual branches' outputs, as Megahost
                    std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

        def forward(self, ids, targets):
            x = self.wte(ids) + self.wpe(torch.arange(T))
            for blk in self.blocks:
                x = blk(x, self.mask)
            logits = self.lnf(x) @ self.wte.weight.t()  # tied lm_head
            return F.cross_entropy(logits.view(-1, V), targets.reshape(-1))

    class LlamaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            F_, K = c["ffn"], c["kv_heads"]
            self.n1, self.n2 = nn.Parameter(torch.ones(h)), nn.Parameter(torch.ones(h))
            self.qkv = nn.Linear(h, h + 2 * K * D, bias=False)
            self.proj = nn.Linear(h, h, bias=False)
            self.gate, self.up = nn.Linear(h, F_, bias=False), nn.Linear(h, F_, bias=False)
            self.down = nn.Linear(F_, h, bias=False)
            self.K = K

        def forward(self, x, mask, cos, sin):
            q, k, v = self.qkv(rms(x, self.n1)).split([h, self.K * D, self.K * D], dim=2)
            q = q.view(B, T, H, D).transpose(1, 2)
            k, v = (t.view(B, T, self.K, D).transpose(1, 2) for t in (k, v))
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k, v = (t.repeat_interleave(H // self.K, dim=1) for t in (k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, h)
            x = x + self.proj(y)
            z = rms(x, self.n2)
            return x + self.down(F.silu(self.gate(z)) * self.up(z))

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def rotate(x, cos, sin):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, h)
            self.blocks = nn.ModuleList(LlamaBlock() for _ in range(L))
            self.norm = nn.Parameter(torch.ones(h))
            self.lm_head = nn.Linear(h, V, bias=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "down.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
            inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
            freqs = torch.outer(torch.arange(T).float(), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos())
            self.register_buffer("sin", emb.sin())
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

        def forward(self, ids, targets):
            x = self.wte(ids)
            for blk in self.blocks:
                x = blk(x, self.mask, self.cos, self.sin)
            logits = self.lm_head(rms(x, self.norm))
            return F.cross_entropy(logits.view(-1, V), targets.reshape(-1))

    model = Llama() if c.get("llama") else GPT()
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == param_count(c), (n_params, param_count(c))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=0.0)
    gen = torch.Generator().manual_seed(42)
    print(json.dumps({"params": n_params, "torch": torch.__version__, "threads": torch.get_num_threads()}),
          flush=True)
    bf16 = args.dtype == "bf16"
    for step in range(1, args.steps + 1):
        ids = torch.randint(0, V, (B, T + 1), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        # bf16: PyTorch's mixed precision on the CPU (bf16 matmuls through oneDNN, f32 parameters)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(ids[:, :-1], ids[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        dt = time.perf_counter() - t0
        print(json.dumps({"step": step, "loss": loss.item(), "step_s": dt}), flush=True)


def run_torch(args, name, dtype, raw_dir, tag):
    c = CONFIGS[name]
    steps = c["warmup"] + c["measured"]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "torch", "--config", name, "--dtype", dtype,
           "--steps", str(steps), "--threads", str(args.threads)]
    log = os.path.join(raw_dir, f"torch-{name}-{dtype}-{tag}.log")
    rc, rss, wall, cpu = run_child(cmd, log, env=child_env(args), step_file=log)
    if rc != 0:
        raise SystemExit(f"torch run failed (rc {rc}), log {log}:\n{tail(log)}")
    rows = [json.loads(l) for l in open(log) if l.startswith("{")]
    steps_rows = [r for r in rows if "step" in r]
    return dict(step_s=[r["step_s"] for r in steps_rows], loss=[r["loss"] for r in steps_rows], rss_mib=rss,
                wall_s=wall, cpu_s_per_step=cpu, info=rows[0])


# ---------------------------------------------------------------- Megahost


def llama_keys(c):
    if not c.get("llama"):
        return ""
    return f'arch = "llama"\nkv_heads = {c["kv_heads"]}\nffn_hidden = {c["ffn"]}\n'


def megahost_config(name, dtype, args, path):
    """Writes the run's whole TOML (nothing taken from configs/default.toml, which
    is a 3D-parallel demo): one rank, no parallelism, no recompute, no dropout."""
    c = CONFIGS[name]
    data = os.path.join(REPO, "data", "corpus_byte")
    toml = f"""# written by bench/cpu_vs_torch.py: config "{name}" of shared/research/baselines.md
[model]
layers = {c["layers"]}
hidden = {c["hidden"]}
heads = {c["heads"]}
seq_len = {c["seq"]}
vocab = {c["vocab"]}          # a multiple of 128, so the padded vocabulary is exactly this
{llama_keys(c)}dropout = 0.0
attention_dropout = 0.0
init_std = 0.02

[train]
steps = {c["warmup"] + c["measured"]}
global_batch = {c["batch"]}
micro_batch = {c["batch"]}
lr = {LR}
min_lr = {LR}
warmup_steps = 0
weight_decay = 0.0
adam_beta1 = {BETA1}
adam_beta2 = {BETA2}
adam_eps = {EPS}
clip_grad = {CLIP}
eval_interval = 0
log_interval = 1

[data]
path = "{data}"     # byte tokens (ids < 257): valid for either vocabulary
tokenizer = "byte"

[kernels]
plugin = "cpu"
threads = {args.threads}
peak_gflops = 50   # MFU is computed by the benchmark against its own GEMM peak measurement
dtype = "{dtype}"

[comm]
plugin = "threads"
world_size = 1

[parallel.tensor]
size = 1

[parallel.pipeline]
size = 1

[recompute]
plugin = "none"
"""
    with open(path, "w") as f:
        f.write(toml)


def run_megahost(args, name, dtype, raw_dir, tag):
    config = os.path.join(raw_dir, f"megahost-{name}-{dtype}.toml")
    if not os.path.exists(config):
        megahost_config(name, dtype, args, config)
    metrics = os.path.join(raw_dir, f"megahost-{name}-{dtype}-{tag}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [args.megahost, "--config", config, "--metrics_out", metrics]
    log = os.path.join(raw_dir, f"megahost-{name}-{dtype}-{tag}.log")
    rc, rss, wall, cpu = run_child(cmd, log, env=child_env(args), step_file=metrics)
    if rc != 0:
        raise SystemExit(f"megahost failed (rc {rc}), log {log}:\n{' '.join(cmd)}\n{tail(log)}")
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    rows = [r for r in rows if "step_s" in r]
    return dict(step_s=[r["step_s"] for r in rows], loss=[r["loss"] for r in rows], rss_mib=rss, wall_s=wall,
                cpu_s_per_step=cpu, command=" ".join(cmd))


def child_env(args):
    env = dict(os.environ)
    # Megahost sizes its own OpenMP team (kernels.threads) and sets OpenBLAS to 1
    # thread; torch.set_num_threads does the same for PyTorch. These only stop a
    # library from starting a larger pool of its own.
    env["OMP_NUM_THREADS"] = str(args.threads)
    env.pop("OPENBLAS_NUM_THREADS", None)
    # libgomp's idle threads spin before they sleep (OMP_WAIT_POLICY unset: up to
    # GOMP_SPINCOUNT = 300k iterations). On a machine where other processes want
    # the cores, that spinning takes their share; --omp_wait_policy passive makes
    # both systems sleep at once instead. Default: whatever the caller's environment says.
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    return env


# ---------------------------------------------------------------- driver


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="tiny,small,llama_small", help="comma-separated: tiny, small, llama_small")
    p.add_argument("--dtypes", default=None,
                   help="comma-separated: fp32, bf16 (needs PyTorch 2.x); default both with PyTorch 2.x, else fp32")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each (megahost, torch) pair")
    p.add_argument("--out", default="/tmp/megahost-bench", help="output directory (JSON + raw logs)")
    p.add_argument("--megahost", default=os.path.join(REPO, "build-bench", "bin", "megahost"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps per run (default per config)")
    p.add_argument("--measured", type=int, default=None, help="measured steps per run (default per config)")
    p.add_argument("--priority", type=int, default=None,
                   help="nice value for the measured processes, e.g. -10 on a machine shared with builds "
                        "(negative needs root); default: inherit")
    p.add_argument("--omp_wait_policy", choices=["active", "passive"], default=None,
                   help="OMP_WAIT_POLICY for both systems (default: the caller's environment)")
    p.add_argument("--sgemm_n", type=int, default=2048)
    p.add_argument("--sgemm_calls", type=int, default=5)
    # internal: the child processes
    p.add_argument("--worker", choices=["torch", "sgemm", "bf16gemm"])
    p.add_argument("--config")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--onednn")
    p.add_argument("--steps", type=int)
    p.add_argument("--openblas")
    args = p.parse_args()

    if args.worker == "torch":
        return torch_worker(args)
    if args.worker == "sgemm":
        return sgemm_worker(args)
    if args.worker == "bf16gemm":
        return bf16gemm_worker(args)

    global PRIORITY
    PRIORITY = args.priority
    names = [n for n in args.configs.split(",") if n]
    for n in names:
        if n not in CONFIGS:
            raise SystemExit(f"unknown config {n!r}; known: {', '.join(CONFIGS)}")
        if args.warmup is not None:
            CONFIGS[n]["warmup"] = args.warmup
        if args.measured is not None:
            CONFIGS[n]["measured"] = args.measured
        if CONFIGS[n]["warmup"] < 1 or CONFIGS[n]["measured"] < 1:
            raise SystemExit("--warmup and --measured must be at least 1")
    if not os.access(args.megahost, os.X_OK):
        raise SystemExit(f"no megahost binary at {args.megahost}; build it (bench/cpu_vs_torch.sh does)")
    try:
        import torch  # only checks that the workers will find it
    except ImportError:
        raise SystemExit(f"{sys.executable} has no torch: run scripts/install-deps.sh and use $(scripts/python-env)")
    torch2 = int(torch.__version__.split(".")[0]) >= 2
    dtypes = [d for d in (args.dtypes or ("fp32,bf16" if torch2 else "fp32")).split(",") if d]
    if any(d not in ("fp32", "bf16") for d in dtypes):
        raise SystemExit(f"--dtypes takes fp32 and bf16, not {args.dtypes!r}")
    if "bf16" in dtypes and not torch2 and int(torch.__version__.split(".")[0]) < 2:
        raise SystemExit(f"bf16 rows compare with PyTorch 2.x's CPU autocast; {sys.executable} has torch "
                         f"{torch.__version__}: run with a PyTorch 2.x python (scripts/python-env names one)")
    args.openblas = find_openblas(args.megahost)
    args.onednn = find_onednn(args.megahost)
    if "bf16" in dtypes and not args.onednn:
        raise SystemExit("no oneDNN found for the bf16 matmul peak: apt-get install -y libdnnl-dev")

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    os.makedirs(args.out, exist_ok=True)
    raw_dir = os.path.join(args.out, f"cpu_vs_torch-{stamp}")
    os.makedirs(raw_dir, exist_ok=True)
    print(f"raw logs in {raw_dir}; OpenBLAS for the sgemm peak: {args.openblas}", flush=True)

    results = {"machine": {"cpu": cpu_model(), "nproc": os.cpu_count(), "python": sys.version.split()[0],
                           "platform": platform.platform()},
               "threads": args.threads, "priority": args.priority,
               "omp_wait_policy": args.omp_wait_policy or os.environ.get("OMP_WAIT_POLICY"),
               "sgemm": {"n": args.sgemm_n, "calls": args.sgemm_calls}, "onednn": args.onednn, "configs": {}}
    for name in names:
        for dtype in dtypes:
            results["configs"][f"{name} {dtype}"] = measure_config(args, name, dtype, raw_dir)

    print_table(results)
    out_json = os.path.join(args.out, f"cpu_vs_torch-{stamp}.json")
    with open(out_json, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nJSON: {out_json}")


def measure_config(args, name, dtype, raw_dir):
    """Interleaved repetitions of one config in one dtype, with the GEMM peak of that dtype before each."""
    c = CONFIGS[name]
    reps = []
    for r in range(args.reps):
        tag = f"r{r}"
        rep = {"load_before": os.getloadavg()}
        rep["sgemm"] = measure_peak(args, raw_dir, f"{name}-{dtype}-{tag}", dtype)
        order = ["megahost", "torch"] if r % 2 == 0 else ["torch", "megahost"]
        for system in order:
            run = (run_megahost if system == "megahost" else run_torch)(args, name, dtype, raw_dir, tag)
            run["load_after"] = os.getloadavg()
            run["median_step_s"] = med(run["step_s"][c["warmup"]:])
            # cpu_s_per_step[i] is step i + 2 (the first step has no start mark)
            run["median_cpu_s"] = med(run["cpu_s_per_step"][c["warmup"] - 1:])
            rep[system] = run
        rep["order"] = order
        for key, label in (("median_step_s", "ratio"), ("median_cpu_s", "cpu_ratio")):
            rep[label] = rep["torch"][key] / rep["megahost"][key]
        reps.append(rep)
        print(f"  {name} {dtype} rep {r} ({' then '.join(order)}): step megahost "
              f"{rep['megahost']['median_step_s']:.3f} s, torch {rep['torch']['median_step_s']:.3f} s, ratio "
              f"{rep['ratio']:.2f}; CPU-s/step {rep['megahost']['median_cpu_s']:.3f} vs "
              f"{rep['torch']['median_cpu_s']:.3f}, ratio {rep['cpu_ratio']:.2f}; {peak_name(dtype)} "
              f"{med(rep['sgemm']['gflops']):.1f} GFLOP/s, {med(rep['sgemm']['gflops_per_cpu_s']):.1f} per CPU-s; "
              f"load {rep['load_before'][0]:.2f}", flush=True)
    flops = model_flops(c)
    peak = med([g for rep in reps for g in rep["sgemm"]["gflops"]])
    peak_cpu = med([g for rep in reps for g in rep["sgemm"]["gflops_per_cpu_s"]])
    summary = {"dtype": dtype, "peak": peak_name(dtype), "peak_impl": reps[0]["sgemm"].get("impl", "OpenBLAS"),
               "model_gflop_per_step": flops / 1e9, "params": param_count(c),
               "sgemm_gflops_median": peak,
               "sgemm_gflops_max": max(g for rep in reps for g in rep["sgemm"]["gflops"]),
               "sgemm_gflops_per_cpu_s_median": peak_cpu,
               "ratio_torch_over_megahost": med([rep["ratio"] for rep in reps]),
               "cpu_ratio_torch_over_megahost": med([rep["cpu_ratio"] for rep in reps]),
               "ratios": [rep["ratio"] for rep in reps], "cpu_ratios": [rep["cpu_ratio"] for rep in reps],
               "load_avg_1min": [rep["load_before"][0] for rep in reps]}
    for system in ("megahost", "torch"):
        step = med([rep[system]["median_step_s"] for rep in reps])
        cpu = med([rep[system]["median_cpu_s"] for rep in reps])
        summary[system] = {"step_s": step, "tokens_per_s": c["batch"] * c["seq"] / step,
                           "gflops": flops / step / 1e9, "pct_of_sgemm": 100.0 * flops / step / 1e9 / peak,
                           "cpu_s_per_step": cpu, "gflop_per_cpu_s": flops / cpu / 1e9,
                           "pct_of_sgemm_per_cpu_s": 100.0 * flops / cpu / 1e9 / peak_cpu,
                           "first_loss": reps[0][system]["loss"][0],
                           "peak_rss_mib": max(rep[system]["rss_mib"] for rep in reps)}
    return {"config": c, "summary": summary, "reps": reps}


def peak_name(dtype):
    return "sgemm" if dtype == "fp32" else "bf16 matmul"


def print_table(results):
    prio = "inherited" if results["priority"] is None else f"nice {results['priority']}"
    print(f"\n{results['threads']} threads each, OMP_WAIT_POLICY {results['omp_wait_policy'] or 'unset'}, "
          f"priority {prio}, {results['machine']['cpu']}. Medians over "
          f"repetitions of each run's median step (warm-up skipped). ratio = torch / megahost (> 1: megahost faster), "
          f"median of the interleaved pairs' ratios. % peak = model GFLOP/s against the GEMM peak of the row's "
          f"dtype measured in this run (N={results['sgemm']['n']}, same threads): OpenBLAS sgemm for fp32, "
          f"oneDNN's bf16 matmul ({results.get('onednn')}) for bf16; per wall second, and per CPU-second "
          f"of all threads (less sensitive to other load).")
    hdr = ("config", "system", "step s", "tok/s", "GFLOP/s", "% peak", "ratio", "CPU-s/step", "GFLOP/CPU-s",
           "% peak/CPU-s", "CPU ratio", "loss@1", "RSS MiB")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name, r in results["configs"].items():
        s = r["summary"]
        for system in ("megahost", "torch"):
            x = s[system]
            ratio = f"{s['ratio_torch_over_megahost']:.2f}" if system == "megahost" else ""
            cratio = f"{s['cpu_ratio_torch_over_megahost']:.2f}" if system == "megahost" else ""
            print(f"| {name} | {system} | {x['step_s']:.3f} | {x['tokens_per_s']:.0f} | {x['gflops']:.1f} | "
                  f"{x['pct_of_sgemm']:.0f}% | {ratio} | {x['cpu_s_per_step']:.3f} | {x['gflop_per_cpu_s']:.1f} | "
                  f"{x['pct_of_sgemm_per_cpu_s']:.0f}% | {cratio} | {x['first_loss']:.3f} | {x['peak_rss_mib']:.0f} |")
    for name, r in results["configs"].items():
        s = r["summary"]
        print(f"{name}: {s['model_gflop_per_step']:.2f} model GFLOP/step; {s['peak']} ({s['peak_impl']}) median "
              f"{s['sgemm_gflops_median']:.1f} "
              f"GFLOP/s (max {s['sgemm_gflops_max']:.1f}), {s['sgemm_gflops_per_cpu_s_median']:.1f} GFLOP per CPU-s; "
              f"per-pair ratios {', '.join(f'{x:.2f}' for x in s['ratios'])} (CPU: "
              f"{', '.join(f'{x:.2f}' for x in s['cpu_ratios'])}); 1-min load before each pair "
              f"{', '.join(f'{l:.1f}' for l in s['load_avg_1min'])}")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
