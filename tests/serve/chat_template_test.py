"""The chat template renderer (host/data/chat_template.*) against
transformers' apply_chat_template on the templates of Llama 3, Qwen2 and
Mistral (tests/serve/templates) over conversations that reach each
template's branches: a system message or none, several turns, contents
with surrounding whitespace, the generation prompt on and off, and the
conversations a template refuses with raise_exception."""

import argparse
import json
import os
import subprocess
import sys
import unittest

p = argparse.ArgumentParser()
p.add_argument("--tool", required=True)
ARGS, rest = p.parse_known_args()
sys.argv = [sys.argv[0]] + rest

try:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
except ImportError:
    print("transformers is missing (scripts/install-deps.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
# features.jinja: the rest of the documented subset (namespace, loops over mappings, filters, tests, slices).
TEMPLATES = ["llama3", "qwen2", "mistral", "features"]
BOS, EOS = "<s>", "</s>"

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "user", "content": "  Hi there \n"}, {"role": "assistant", "content": " Hello! "},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me a joke."}],
    [{"role": "system", "content": "Sys"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
     {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}],
    [{"role": "user", "content": "Unicode: é ✓ 日本"}],
    # Refused by Mistral's: roles must alternate.
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    [{"role": "tool", "content": "x"}],
]


def transformers_render(template, messages, add_generation_prompt):
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                  bos_token=BOS, eos_token=EOS)
    tok.chat_template = template
    try:
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt), None
    except Exception as e:  # the template's raise_exception
        return None, str(e)


def megahost_render(path, messages, add_generation_prompt):
    context = {"messages": messages, "add_generation_prompt": add_generation_prompt, "bos_token": BOS,
               "eos_token": EOS}
    r = subprocess.run([ARGS.tool, path, json.dumps(context)], capture_output=True)
    out = r.stdout.decode()
    if r.returncode == 3:
        return None, out[len("ERROR: "):]
    assert r.returncode == 0, r.stderr.decode()
    return out, None


class ChatTemplates(unittest.TestCase):
    def test_every_template_renders_as_transformers_does(self):
        for name in TEMPLATES:
            path = os.path.join(HERE, "templates", name + ".jinja")
            with open(path) as f:
                template = f.read()
            for messages in CONVERSATIONS:
                for gen in (True, False):
                    with self.subTest(template=name, messages=messages, add_generation_prompt=gen):
                        want, want_error = transformers_render(template, messages, gen)
                        got, got_error = megahost_render(path, messages, gen)
                        self.assertEqual(got, want)
                        if want_error is not None:
                            self.assertIn(want_error, got_error)


if __name__ == "__main__":
    unittest.main()
