"""A load of concurrent clients against `megahost` with [serve]: 32
streaming clients with mixed prompt and completion lengths each get the
whole of what the same request gets alone; malformed and oversized
requests mixed in get their status codes and the server stays up; a client
that disconnects, mid-stream or waiting for a whole answer, frees its slot
at the next step; a request while the model loads gets 503."""

import http.client
import json
import os
import random
import sys
import threading
import time
import unittest

import serve_harness as h

sys.argv = h.parse_args()

try:
    import openai
except ImportError:
    print("the openai package is missing (scripts/install-deps.sh installs it)")
    sys.exit(77)

WORDS = "the cat sat on a mat and then she said once upon a time there was".split()


def setUpModule():
    global MODEL
    MODEL = h.train("model", ["model.seq_len=96"])


def tearDownModule():
    h.cleanup()


class Load(unittest.TestCase):
    def test_32_streams_with_mixed_lengths_each_get_their_whole_answer(self):
        rng = random.Random(5)
        asks = [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))), rng.randint(1, 24)) for _ in range(32)]
        # A small prefill budget: long prompts are prefilled in chunks beside the decode rows.
        with h.Server(MODEL, ["serve.max_batch=8", "serve.max_queue=64", "serve.prefill_chunk=8",
                              "serve.max_new_tokens=24"]) as s:
            c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
            alone = [c.completions.create(model="m", prompt=p, max_tokens=n, temperature=0).choices[0].text
                     for p, n in asks]
            got = [None] * len(asks)
            bad = []

            def stream(i):
                p, n = asks[i]
                chunks = c.completions.create(model="m", prompt=p, max_tokens=n, temperature=0, stream=True)
                got[i] = "".join(x.choices[0].text for x in chunks)

            def malformed(body, status):
                code, text = s.post("/v1/completions", body)
                bad.append((code, status, text))

            threads = [threading.Thread(target=stream, args=(i,)) for i in range(len(asks))]
            wrong = [(b"{\"prompt\": ", 400), ({"prompt": "x" * 500}, 400), ({"prompt": "x", "max_tokens": 25}, 400),
                     ({"prompt": "x", "n": 0}, 400), (b"\xff\xfe", 400), ({"prompt": "x", "stop": 3}, 400),
                     ({"prompt": ["x"] * 9}, 400), ({"prompt": [[5, 300]]}, 400), ({"prompt": "x", "max_tokens": -1}, 400)]
            threads += [threading.Thread(target=malformed, args=w) for w in wrong]
            random.Random(6).shuffle(threads)
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(got, alone)
            for code, status, text in bad:
                self.assertEqual(code, status, text)
                self.assertIn("error", json.loads(text))
            self.assertEqual(s.get("/health")[0], 200)
            self.assertEqual(s.stop(), 0)

    def check_client_gone_frees_its_slot(self, stream):
        # An untrained model of a longer context: a completion of 900 tokens
        # (ignore_eos: the end-of-document token does not end it sooner)
        # takes far longer than noticing the closed connection.
        with h.Server(["model.seq_len=1024", "model.hidden=128"], ["serve.max_batch=1", "serve.max_new_tokens=1000"]) as s:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            conn.request("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 900, "stream": stream, "ignore_eos": True}),
                         {"Content-Type": "application/json"})
            if stream:
                r = conn.getresponse()
                self.assertEqual(r.status, 200)
                self.assertTrue(r.readline().startswith(b"data: "))
            else:  # nothing comes back before the end: leave once it runs
                while s.metric("megahost_running_sequences") == 0:
                    time.sleep(0.01)
            conn.sock.shutdown(2)
            conn.close()
            deadline = time.monotonic() + 30
            while s.metric("megahost_running_sequences") > 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            # The slot is free long before 900 tokens: the next request runs at once.
            start = time.monotonic()
            code, text = s.post("/v1/completions", {"prompt": "y", "max_tokens": 2})
            self.assertEqual(code, 200, text)
            self.assertLess(s.metric("megahost_generation_tokens_total"), 900)
            self.assertEqual(s.metric("megahost_requests_cancelled_total"), 1)
            self.assertEqual(s.stop(), 0)

    def test_a_client_gone_mid_stream_frees_its_slot(self):
        self.check_client_gone_frees_its_slot(stream=True)

    def test_a_client_gone_before_its_whole_answer_frees_its_slot(self):
        self.check_client_gone_frees_its_slot(stream=False)

    def test_requests_while_the_model_loads_get_503_then_are_served(self):
        release = os.path.join(h.SCRATCH, "loaded")
        os.environ["MEGAHOST_SERVE_HOLD_LOADING"] = release
        try:
            s = h.Server(MODEL, ["serve.max_batch=2"], ready=False)
        finally:
            del os.environ["MEGAHOST_SERVE_HOLD_LOADING"]
        with s:
            for path in ["/v1/completions", "/v1/chat/completions"]:
                code, text = s.post(path, {"prompt": "x", "messages": [{"role": "user", "content": "x"}]})
                self.assertEqual(code, 503, text)
                err = json.loads(text)["error"]
                self.assertEqual((err["type"], err["code"]), ("service_unavailable", 503), text)
                self.assertIn("loading", err["message"])
            self.assertEqual(s.get("/health")[0], 503)
            with self.assertRaises(openai.InternalServerError):
                openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0).completions.create(
                    model="m", prompt="x", max_tokens=2)
            open(release, "w").close()
            s.wait_ready()
            code, text = s.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
            self.assertEqual(code, 200, text)
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main()
