"""Megahost against transformers for models whose head size is not
hidden_size / num_attention_heads (docs/convert.md, docs/models.md):
LlamaForCausalLM with an explicit head_dim (--family llama_head_dim) and
Qwen3ForCausalLM (--family qwen3: QK-norm, no biases), each with 4 heads
of 24 over a hidden size of 64 and grouped-query attention.

For the family: the round trip of transformers_interop.py (f32, every
tensor equal); its parity (the loss and every gradient, --evaluate on
the folder, three steps on two tensor-parallel ranks exported and
transformers' loss on the export equal to Megahost's); greedy generation on
one rank and on two tensor-parallel ranks giving transformers' generate() ids.

Needs torch and transformers; exits 77 (skipped) without them."""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transformers_interop as interop  # noqa: E402  (exits 77 without torch)
from transformers_interop import SEQ, make  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

HEAD_DIM = 24  # 4 heads of 24 = 96 wide against a hidden size of 64


def llama_head_dim(dtype):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM,
                                      vocab_size=interop.VOCAB, max_position_embeddings=SEQ,
                                      tie_word_embeddings=False, rope_theta=500000.0)
    return transformers.LlamaForCausalLM(config).to(dtype)


def qwen3(dtype):
    config = transformers.Qwen3Config(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM,
                                      vocab_size=interop.VOCAB, max_position_embeddings=SEQ,
                                      tie_word_embeddings=False, rope_theta=1000000.0, use_sliding_window=False)
    model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():  # transformers starts the QK-norm weights at one: give them values to check
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.uniform_(0.5, 1.5)
    return model.to(dtype)


FAMILIES = {"llama_head_dim": llama_head_dim, "qwen3": qwen3}


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare", "ckpt"):
        ap.add_argument(f"--{tool}", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    maker = FAMILIES[tools.family]
    with tempfile.TemporaryDirectory() as tmp:
        # f32 alone: bf16's rounding is the same per tensor whatever the head size (transformers_interop.py).
        interop.round_trip(tools, tmp, tools.family, maker, torch.float32)
        data, tokens = interop.prepare_dataset(tools, tmp)
        interop.parity(tools, tmp, tools.family, maker, data, tokens)
        import transformers_generate as gen  # sets the models' vocabulary to the byte tokenizer's
        gen.check(tools, tmp, tools.family, maker)


if __name__ == "__main__":
    main()
