"""lm-evaluation-harness (PyPI lm-eval, model `local-completions`) against
`megahost` with [serve]: it scores a small local task (a JSONL written here,
nothing downloaded) through echo + logprobs, and its log-likelihoods equal
the per-token losses `megahost --evaluate` computes on the same text.

The model is exported to a Hugging Face folder, which gives lm-eval its
tokenizer and lets --evaluate run at a shorter sequence length than the
server (a learned position table keeps its first rows): an --evaluate
window of E + 1 tokens is a prompt of E + 1 tokens, and lm-eval asks for one
token more, so the server's context must be E + 2 at least."""

import argparse
import json
import os
import subprocess
import sys
import unittest

import serve_harness as h

p = argparse.ArgumentParser()
p.add_argument("--prepare", required=True, help="megahost_prepare")
p.add_argument("--convert", required=True, help="megahost_convert")
TOOLS, rest = p.parse_known_args(h.parse_args()[1:])
sys.argv = [sys.argv[0]] + rest

os.environ.update({"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
os.environ["HF_HOME"] = os.path.join(h.SCRATCH, "hf_home")
try:
    import lm_eval
    from lm_eval.tasks import TaskManager
except ImportError as e:  # CI must run this test: a missing lm-eval fails it
    print(f"lm_eval cannot be imported ({e}); scripts/install-deps.sh installs lm-eval")
    sys.exit(1)

SERVED = 64  # the server's context: model.seq_len of the trained model
E = 48  # --evaluate's model.seq_len: a window of E + 1 tokens, E targets
WINDOWS = 3
# Two passes of the same f32 model that add the same terms in different
# orders (the training forward over a window; the serving engine's packed
# prefill with its KV cache) differ in logits by about 1e-6; the mean over
# WINDOWS * E tokens adds f32 rounding of about loss * 144 * 6e-8 = 3e-5.
# 1e-4 bounds both, while any real error (a token scored against the wrong
# context, off by one position, one token missing or counted twice) moves
# the mean by one token's log-probability / 144, over 5e-3.
TOLERANCE = 1e-4


def text():
    """WINDOWS * E + 1 bytes of English without whitespace: lm-eval moves a
    context's trailing whitespace into the continuation, so no context here
    may end in one."""
    with open(os.path.join(os.path.dirname(h.ARGS.config), "..", "..", "data", "corpus.txt")) as f:
        words = f.read(20000).split()
    return "".join(words)[1000:1000 + WINDOWS * E + 1]


def setUpModule():
    global HF, TEXT, LOSS, TOKENS
    model = h.train("model", [f"model.seq_len={SERVED}"])
    HF = os.path.join(h.SCRATCH, "hf")
    ckpt = [a.split("=", 1)[1] for a in model if a.startswith("checkpoint.dir=")][0]
    r = subprocess.run([TOOLS.convert, "--input", ckpt, "--output", HF], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    TEXT = text()
    assert len(TEXT) == WINDOWS * E + 1 and TEXT.isascii()
    # One document: the text then the end-of-document token; the windows of
    # E + 1 tokens start every E tokens, so they cover the text and not the EOD.
    with open(os.path.join(h.SCRATCH, "text.txt"), "w") as f:
        f.write(TEXT + "\n")
    prefix = os.path.join(h.SCRATCH, "text")
    r = subprocess.run([TOOLS.prepare, f"--input={prefix}.txt", "--tokenizer=byte", f"--output_prefix={prefix}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    metrics = os.path.join(h.SCRATCH, "evaluate.jsonl")
    r = h.megahost(["--evaluate", f"checkpoint.load={HF}", f"model.seq_len={E}", f"data.test_paths=1 {prefix}",
                    f"--metrics_out={metrics}"] + h.MODEL)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(metrics) as f:
        record = [json.loads(line) for line in f if '"evaluate"' in line][0]
    LOSS, TOKENS = record["loss"], record["tokens"]


def tearDownModule():
    h.cleanup()


def write_task(name, docs):
    folder = os.path.join(h.SCRATCH, name)
    os.makedirs(folder)
    data = os.path.join(folder, "docs.jsonl")
    with open(data, "w") as f:
        for context, continuation in docs:
            f.write(json.dumps({"context": context, "continuation": continuation}) + "\n")
    with open(os.path.join(folder, name + ".yaml"), "w") as f:
        f.write(f"""task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: "{{{{context}}}}"
doc_to_target: "{{{{continuation}}}}"
target_delimiter: ""
metric_list:
  - metric: acc
""")
    return folder


def run_lm_eval(server, name, docs, tokenizer):
    """lm-eval's log-likelihood and is-greedy of each doc, in the docs' order."""
    folder = write_task(name, docs)
    args = dict(model="megahost", base_url=server.url + "/v1/completions", max_length=SERVED, batch_size=4,
                num_concurrent=2, max_retries=1, tokenized_requests=True, **tokenizer)
    out = lm_eval.simple_evaluate(model="local-completions", model_args=args, tasks=[name],
                                  task_manager=TaskManager(include_path=folder), log_samples=True)
    samples = sorted(out["samples"][name], key=lambda s: s["doc_id"])
    assert len(samples) == len(docs), samples
    return [tuple(s["resps"][0][0]) for s in samples]


class LmEval(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = h.Server(["checkpoint.load=" + HF, f"model.seq_len={SERVED}"] + h.MODEL, ["serve.max_batch=4"])

    @classmethod
    def tearDownClass(cls):
        status = cls.server.stop()
        cls.server.__exit__()
        assert status == 0, status

    def test_window_log_likelihoods_equal_evaluate_losses(self):
        self.assertEqual(TOKENS, WINDOWS * E)
        # Each --evaluate window: its first token the context, the other E the continuation.
        docs = [(TEXT[w * E], TEXT[w * E + 1:w * E + E + 1]) for w in range(WINDOWS)]
        for tokenizer in [dict(tokenizer_backend="huggingface", tokenizer=HF), dict(tokenizer_backend="remote")]:
            got = run_lm_eval(self.server, "windows_" + tokenizer["tokenizer_backend"], docs, tokenizer)
            self.assertAlmostEqual(-sum(ll for ll, _ in got) / TOKENS, LOSS, delta=TOLERANCE)

    def test_one_token_continuations_add_up_to_the_window(self):
        # The first window token by token: the log-likelihood of each next
        # token given all before it, served as prompts of every length.
        docs = [(TEXT[:j], TEXT[j]) for j in range(1, E + 1)] + [(TEXT[0], TEXT[1:E + 1])]
        got = run_lm_eval(self.server, "tokens", docs, dict(tokenizer_backend="remote"))
        singles, whole = got[:-1], got[-1]
        self.assertTrue(all(ll < 0 for ll, _ in singles))
        self.assertAlmostEqual(sum(ll for ll, _ in singles), whole[0], delta=TOLERANCE * E)
        # is_greedy is lm-eval's check that each continuation token is the
        # likeliest: the whole window is greedy exactly when every token is.
        self.assertEqual(whole[1], all(greedy for _, greedy in singles))


if __name__ == "__main__":
    unittest.main()
