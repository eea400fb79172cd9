"""LoRA adapters out of Megahost into transformers and peft (docs/finetune.md).

A Llama model made by transformers (seeded init, no download) is converted to
a Megahost checkpoint and fine-tuned with [peft] method = "lora" on it as the
frozen base, on two tensor-parallel ranks (so the export assembles sliced
adapters). At the adapters of step 3, Megahost's loss (step 4's, before its
update, on one rank) equals, within 1e-4 relative (the fp32 parity tolerance
of transformers_interop.py):
  - transformers' loss on the merged export (megahost_convert), and
  - peft's loss with the adapter folder (megahost_convert --peft) loaded
    onto the base by PeftModel.from_pretrained,
and the two give the same logits. The adapters moved the loss off the base's.
Megahost's greedy generation with the adapters ([generate] with [peft]) gives
the ids it generates from the merged export.

Needs torch, transformers and peft; exits 77 (skipped) without them."""
import argparse
import json
import os
import sys
import tempfile

try:
    import torch
    import transformers
    import peft
except ImportError as e:
    print(f"skipped: {e}; scripts/python-requirements.txt lists torch, transformers and peft")
    sys.exit(77)

from transformers_interop import SEQ, loss_of, make, metrics_loss, prepare_dataset, run, variant_keys, write_config

TOLERANCE = 1e-4
LORA = '[peft]\nmethod = "lora"\nrank = 4\nalpha = 8\ntargets = "qkv,proj,gate,fc1,fc2"\nbase = "{base}"\n'


def llama(dtype):
    # The byte tokenizer's 257 ids, so that generation can decode every id the model may pick.
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=257,
                                      max_position_embeddings=SEQ, tie_word_embeddings=False, rope_theta=500000.0)
    return transformers.LlamaForCausalLM(config).to(dtype)


def generated_ids(tools, tmp, name, load, extra):
    config, metrics = os.path.join(tmp, f"{name}.toml"), os.path.join(tmp, f"{name}.jsonl")
    with open(config, "w") as f:
        f.write(f'[checkpoint]\nload = "{load}"\n[kernels]\nthreads = 1\n[generate]\nprompt = "the quick"\n'
                f'max_new_tokens = 8\ntemperature = 0.0\nstop_at_eod = false\n{extra}')
    run(tools.megahost, "--config", config, "--metrics_out", metrics)
    with open(metrics) as f:
        return [r["tokens"] for r in map(json.loads, f) if "request" in r]


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare"):
        ap.add_argument(f"--{tool}", required=True)
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        data, tokens = prepare_dataset(tools, tmp)
        model = make(llama, torch.float32)
        hf, base = os.path.join(tmp, "base_hf"), os.path.join(tmp, "base_ckpt")
        model.save_pretrained(hf, safe_serialization=True)
        run(tools.convert, "--input", hf, "--output", base)
        with torch.no_grad():
            base_loss = loss_of(model, tokens).item()

        shape = ["model.vocab=257", "model.seq_len=32", "model.layers=2", "model.hidden=64", "model.heads=4",
                 "model.dropout=0", "model.attention_dropout=0", *variant_keys(model.config)]
        trained = os.path.join(tmp, "lora")
        config = write_config(tmp, "lora_train", data, "", steps=3, extra=f'dir = "{trained}"\n' + LORA.format(base=base))
        run(tools.megahost, "--config", config, "comm.world_size=2", "parallel.tensor.size=2", *shape,
            "--metrics_out", os.path.join(tmp, "lora_train.jsonl"))
        step3 = os.path.join(trained, "step_000000003")
        config = write_config(tmp, "lora_step4", data, step3, steps=4, extra=LORA.format(base=base))
        metrics = os.path.join(tmp, "lora_step4.jsonl")
        run(tools.megahost, "--config", config, *shape, "--metrics_out", metrics)
        ours = metrics_loss(metrics, 4)

        merged, adapter = os.path.join(tmp, "merged"), os.path.join(tmp, "adapter")
        run(tools.convert, "--input", step3, "--output", merged)
        run(tools.convert, "--input", step3, "--output", adapter, "--peft")
        with torch.no_grad():
            merged_model = transformers.LlamaForCausalLM.from_pretrained(merged).eval()
            peft_model = peft.PeftModel.from_pretrained(transformers.LlamaForCausalLM.from_pretrained(hf),
                                                        adapter).eval()
            merged_loss, peft_loss = loss_of(merged_model, tokens).item(), loss_of(peft_model, tokens).item()
            a, b = merged_model(tokens[:, :SEQ]).logits, peft_model(tokens[:, :SEQ]).logits
            logits_error = float((a - b).abs().max() / b.abs().max())
        print(f"Megahost's loss with adapters {ours:.6f}; transformers' on the merged export {merged_loss:.6f}; "
              f"peft's with the adapter folder {peft_loss:.6f}; logits merged vs peft: relative {logits_error:.1e}; "
              f"the base's loss {base_loss:.6f}")
        for theirs in (merged_loss, peft_loss):
            assert abs(theirs - ours) / ours <= TOLERANCE, (ours, merged_loss, peft_loss)
        assert logits_error <= TOLERANCE, logits_error
        assert abs(ours - base_loss) > 1e-3, (ours, base_loss)

        with_adapters = generated_ids(tools, tmp, "gen_lora", step3, LORA.format(base=base))
        from_merged = generated_ids(tools, tmp, "gen_merged", merged, "")
        print(f"greedy ids with the adapters {with_adapters}, from the merged export {from_merged}")
        assert with_adapters == from_merged and len(with_adapters) == 1, (with_adapters, from_merged)


if __name__ == "__main__":
    main()
