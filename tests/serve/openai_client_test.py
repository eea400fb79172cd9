"""The official openai client against `megahost` with [serve] on 127.0.0.1:
completions, chat completions and streaming; greedy completions equal
[generate]'s on one rank and on TP 2 x PP 2, a mixture of experts' on TP 2;
OpenAI-style errors with their
status codes; an API key; SIGTERM drains the requests accepted."""

import json
import os
import sys
import threading
import unittest

import serve_harness as h

sys.argv = h.parse_args()

try:
    import openai
except ImportError:
    print("the openai package is missing (scripts/install-deps.sh installs it)")
    sys.exit(77)

PROMPTS = ["The ", "Once upon a time, ", "and then she said", "x", "It was"]
NEW = 12
TP2_PP2 = ["comm.world_size=4", "parallel.tensor.size=2", "parallel.pipeline.size=2"]
MOE = ["model.arch=llama", "model.experts=4", "model.router_topk=2"]
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
         "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def setUpModule():
    global MODEL, GENERATED, TEMPLATE
    MODEL = h.train("model", ["model.seq_len=160"])
    GENERATED = h.generate(MODEL, PROMPTS, NEW)
    TEMPLATE = os.path.join(h.SCRATCH, "tokenizer_config.json")
    with open(TEMPLATE, "w") as f:
        json.dump({"chat_template": QWEN2, "eos_token": "<|im_end|>"}, f)


def tearDownModule():
    h.cleanup()


def client(server, key="unused"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def finish(record):
    return "stop" if record["stopped_at_eod"] else "length"


class GreedyCompletions(unittest.TestCase):
    def check_layout(self, layout, model=None, generated=None):
        model, generated = model or MODEL, generated or GENERATED
        with h.Server(model + layout, ["serve.max_batch=4"]) as s:
            c = client(s)
            for prompt, want in zip(PROMPTS, generated):
                r = c.completions.create(model="megahost", prompt=prompt, max_tokens=NEW, temperature=0)
                self.assertEqual(r.choices[0].text, want["text"], prompt)
                self.assertEqual(r.choices[0].finish_reason, finish(want))
                self.assertEqual(r.usage.completion_tokens, want["new_tokens"] - (want["stopped_at_eod"] is True))
            # Many prompts in one request, served together.
            r = c.completions.create(model="megahost", prompt=PROMPTS[:4], max_tokens=NEW, temperature=0)
            self.assertEqual([x.text for x in sorted(r.choices, key=lambda x: x.index)],
                             [g["text"] for g in generated[:4]])
            self.assertEqual(s.stop(), 0)

    def test_equal_generate_on_one_rank(self):
        self.check_layout([])

    def test_equal_generate_on_tp2_pp2(self):
        self.check_layout(TP2_PP2)

    # Decoding has no sequence parallelism: each tensor rank runs the whole
    # mixture on every row, and the tokens are one rank's.
    def test_mixture_of_experts_equal_generate_on_tp2(self):
        model = h.train("moe", MOE)
        self.check_layout(["comm.world_size=2", "parallel.tensor.size=2"], model, h.generate(model, PROMPTS, NEW))


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = h.Server(MODEL, ["serve.max_batch=4", "serve.max_new_tokens=16", f"serve.chat_template={TEMPLATE}"])
        cls.client = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__()

    def test_stream_gives_the_same_text_in_chunks_and_ends_with_done(self):
        whole = self.client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=NEW, temperature=0)
        chunks = list(self.client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=NEW, temperature=0,
                                                     stream=True))
        self.assertEqual("".join(c.choices[0].text for c in chunks), whole.choices[0].text)
        self.assertEqual(chunks[-1].choices[0].finish_reason, whole.choices[0].finish_reason)
        status, body = self.server.post("/v1/completions", {"prompt": "The ", "max_tokens": 4, "stream": True})
        self.assertEqual(status, 200)
        events = [e for e in body.split("\n\n") if e]
        self.assertTrue(all(e.startswith("data: ") for e in events), body)
        self.assertEqual(events[-1], "data: [DONE]")

    def test_chat_renders_the_template_and_continues_it_as_a_completion(self):
        messages = [{"role": "user", "content": "Once upon a time"}]
        rendered = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                    "Once upon a time<|im_end|>\n<|im_start|>assistant\n")
        chat = self.client.chat.completions.create(model="m", messages=messages, max_tokens=10, temperature=0)
        plain = self.client.completions.create(model="m", prompt=rendered, max_tokens=10, temperature=0)
        self.assertEqual(chat.choices[0].message.role, "assistant")
        self.assertEqual(chat.choices[0].message.content, plain.choices[0].text)
        self.assertEqual(chat.usage.prompt_tokens, plain.usage.prompt_tokens)
        streamed = self.client.chat.completions.create(model="m", messages=messages, max_tokens=10, temperature=0,
                                                       stream=True)
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in streamed), chat.choices[0].message.content)

    def test_seeded_sampling_is_reproducible_and_n_gives_distinct_choices(self):
        ask = dict(model="m", prompt="The ", max_tokens=10, temperature=1.0, seed=7, n=3)
        a = self.client.completions.create(**ask)
        b = self.client.completions.create(**ask)
        self.assertEqual([x.text for x in a.choices], [x.text for x in b.choices])
        self.assertEqual(len(a.choices), 3)
        self.assertGreater(len({x.text for x in a.choices}), 1)

    def test_stop_sequences_cut_the_text(self):
        whole = self.client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=NEW, temperature=0)
        text = whole.choices[0].text
        stop = text[3:5]
        cut = self.client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=NEW, temperature=0, stop=[stop])
        self.assertEqual(cut.choices[0].text, text[:text.find(stop)])
        self.assertEqual(cut.choices[0].finish_reason, "stop")

    def test_echo_with_logprobs_and_no_tokens_scores_the_prompt(self):
        r = self.client.completions.create(model="m", prompt="Once upon", max_tokens=0, echo=True, logprobs=1)
        lp = r.choices[0].logprobs
        self.assertEqual(r.choices[0].text, "Once upon")
        self.assertEqual(len(lp.tokens), 9)
        self.assertIsNone(lp.token_logprobs[0])
        self.assertTrue(all(x < 0 for x in lp.token_logprobs[1:]))
        # A token's log-probability is at most the likeliest one's.
        for x, top in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
            self.assertLessEqual(x, max(top.values()) + 1e-6)

    def test_logprobs_tokens_join_to_the_text_at_their_offsets(self):
        r = self.client.completions.create(model="m", prompt="Once upon", max_tokens=NEW, temperature=0, echo=True,
                                           logprobs=0)
        text, lp = r.choices[0].text, r.choices[0].logprobs
        self.assertEqual("".join(lp.tokens), text)
        self.assertEqual(lp.text_offset, [len("".join(lp.tokens[:i]).encode()) for i in range(len(lp.tokens))])
        # Streamed: each chunk's tokens continue the text at their offsets.
        chunks = list(self.client.completions.create(model="m", prompt="Once upon", max_tokens=NEW, temperature=0,
                                                     logprobs=0, stream=True))
        tokens = [t for c in chunks for t in c.choices[0].logprobs.tokens]
        offsets = [o for c in chunks for o in c.choices[0].logprobs.text_offset]
        self.assertEqual("".join(tokens), "".join(c.choices[0].text for c in chunks))
        self.assertEqual(offsets, [len("".join(tokens[:i]).encode()) for i in range(len(tokens))])

    def test_models_health_and_metrics(self):
        self.assertEqual([m.id for m in self.client.models.list()], ["megahost"])
        self.assertEqual(self.server.get("/health")[0], 200)
        self.client.completions.create(model="m", prompt="x", max_tokens=2)
        _, text = self.server.get("/metrics")
        for name in ["megahost_requests_total", "megahost_generation_tokens_total", "megahost_queue_depth",
                     "megahost_time_to_first_token_seconds_bucket", "megahost_time_per_output_token_seconds_count"]:
            self.assertIn(name, text)

    def test_bad_requests_get_openai_errors_with_their_status(self):
        cases = [
            (b"{not json", 400, None),
            ({"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
            ({"prompt": "x", "max_tokens": 17}, 400, "max_tokens"),
            ({"prompt": "x" * 200}, 400, "prompt"),
            ({"prompt": "x" * 150, "max_tokens": 16}, 400, "max_tokens"),
            ({"prompt": "x", "temperature": 9}, 400, "temperature"),
            ({"prompt": 5}, 400, "prompt"),
            ({"prompt": [[1, 2], [99999]]}, 400, "prompt"),
            ({}, 400, "prompt"),
            ([1, 2], 400, None),
        ]
        for body, status, param in cases:
            got, text = self.server.post("/v1/completions", body)
            self.assertEqual(got, status, (body, text))
            err = json.loads(text)["error"]
            self.assertEqual(err["type"], "invalid_request_error")
            self.assertEqual(err["param"], param, text)
        got, text = self.server.post("/v1/chat/completions", {"messages": "hi"})
        self.assertEqual(got, 400, text)
        got, text = self.server.get("/v1/nothing")
        self.assertEqual(got, 404)
        self.assertIn("error", json.loads(text))
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model="m", prompt="x", max_tokens=1000)
        self.assertEqual(self.server.get("/health")[0], 200)


class Access(unittest.TestCase):
    def test_a_key_is_required_when_set(self):
        with h.Server(MODEL, ["serve.api_key=sesame"]) as s:
            self.assertEqual(s.post("/v1/completions", {"prompt": "x"})[0], 401)
            self.assertEqual(s.post("/v1/completions", {"prompt": "x"}, {"Authorization": "Bearer nope"})[0], 401)
            with self.assertRaises(openai.AuthenticationError):
                client(s, "nope").completions.create(model="m", prompt="x", max_tokens=2)
            r = client(s, "sesame").completions.create(model="m", prompt="x", max_tokens=2)
            self.assertEqual(len(r.choices), 1)
            self.assertEqual(s.get("/health")[0], 200)

    def test_a_full_queue_answers_429_and_the_rest_are_served(self):
        with h.Server(MODEL, ["serve.max_batch=1", "serve.max_queue=1"]) as s:
            results = []
            lock = threading.Lock()

            def ask():
                got = s.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})
                with lock:
                    results.append(got)

            threads = [threading.Thread(target=ask) for _ in range(24)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            codes = sorted(code for code, _ in results)
            self.assertIn(429, codes)
            self.assertIn(200, codes)
            self.assertEqual(set(codes), {200, 429})
            texts = {json.loads(body)["choices"][0]["text"] for code, body in results if code == 200}
            self.assertEqual(len(texts), 1)
            for code, body in results:
                if code == 429:
                    self.assertEqual(json.loads(body)["error"]["type"], "rate_limit_error")

    def test_sigterm_finishes_the_requests_accepted_then_exits_0(self):
        with h.Server(MODEL, ["serve.max_batch=2"]) as s:
            out = []
            t = threading.Thread(target=lambda: out.append(
                s.post("/v1/completions", {"prompt": PROMPTS[1], "max_tokens": NEW, "temperature": 0})))
            t.start()
            while s.metric("megahost_running_sequences") + s.metric("megahost_queue_depth") == 0 and not out:
                pass
            self.assertEqual(s.stop(), 0)
            t.join()
            self.assertEqual(out[0][0], 200, out)
            self.assertEqual(json.loads(out[0][1])["choices"][0]["text"], GENERATED[1]["text"])


if __name__ == "__main__":
    unittest.main()
