"""Megahost's mixture of experts against transformers' MixtralForCausalLM
or, with --family qwen2_moe / qwen3_moe, Qwen2MoeForCausalLM /
Qwen3MoeForCausalLM (docs/models.md, docs/convert.md).

A random tiny model (4 experts, top 2, grouped-query attention; Qwen2-MoE's
with QKV biases, unnormalised top-k gates and a gated shared expert;
Qwen3-MoE's with QK-norm and heads of 24 over a hidden size of 64) made by
transformers (config + seeded init, no download):

- round trip: saved with save_pretrained, converted to a Megahost checkpoint
  and back in f32 and bf16; from_pretrained loads it and every tensor is equal;
- parity: Megahost trains one step on the imported folder with a dataset whose
  every sample is one known sequence. The language-model loss (cross-entropy
  alone) is within TOLERANCE of transformers'; Megahost's moe_aux_loss is the
  layers' load-balancing losses summed, which the test computes from
  transformers' router logits layer by layer (transformers' own aux_loss pools
  all layers' tokens before the product, a different number for more than one
  layer); every gradient of LM loss + that sum is within TOLERANCE;
- --evaluate on the folder gives the LM loss over the whole split;
- three steps of training on two pipeline stages, exported: transformers'
  loss on the export is Megahost's at those weights;
- greedy generation from the folder gives transformers' generate() ids.

Needs torch and transformers; exits 77 (skipped) without them."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transformers_interop as interop  # noqa: E402  (exits 77 without torch)
from transformers_interop import SEQ, VOCAB, make, run, relative, read_grads, read_checkpoint  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

transformers.generation.utils.is_fsdp_managed_module = lambda module: False

# Relative error allowed between f32 computations summed in different orders;
# the loss of 32 tokens, each one log-softmax over VOCAB, agrees far closer.
TOLERANCE = 1e-4
LOSS_TOLERANCE = 1e-5
COEF = 0.02
EXPERTS, TOPK = 4, 2


def mixtral(dtype, vocab=VOCAB):
    config = transformers.MixtralConfig(hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                        max_position_embeddings=SEQ, num_local_experts=EXPERTS,
                                        num_experts_per_tok=TOPK, router_aux_loss_coef=COEF,
                                        output_router_logits=True, rope_theta=10000.0, sliding_window=None)
    return transformers.MixtralForCausalLM(config).to(dtype)


def qwen2_moe(dtype, vocab=VOCAB):
    config = transformers.Qwen2MoeConfig(hidden_size=64, intermediate_size=56, moe_intermediate_size=48,
                                         shared_expert_intermediate_size=40, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                         max_position_embeddings=SEQ, num_experts=EXPERTS,
                                         num_experts_per_tok=TOPK, norm_topk_prob=False, qkv_bias=True,
                                         router_aux_loss_coef=COEF, output_router_logits=True,
                                         rope_theta=10000.0, use_sliding_window=False)
    return transformers.Qwen2MoeForCausalLM(config).to(dtype)


def qwen3_moe(dtype, vocab=VOCAB):
    config = transformers.Qwen3MoeConfig(hidden_size=64, intermediate_size=56, moe_intermediate_size=48,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         head_dim=24, vocab_size=vocab, max_position_embeddings=SEQ,
                                         num_experts=EXPERTS, num_experts_per_tok=TOPK, norm_topk_prob=True,
                                         router_aux_loss_coef=COEF, output_router_logits=True,
                                         rope_theta=10000.0, use_sliding_window=False)
    model = transformers.Qwen3MoeForCausalLM(config)
    with torch.no_grad():  # transformers starts the QK-norm weights at one: give them values to check
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.uniform_(0.5, 1.5)
    return model.to(dtype)


FAMILIES = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "qwen3_moe": qwen3_moe}


def aux_per_layer(router_logits, tokens):
    """coef E sum_e f_e P_e per layer, f_e the tokens routed to e over the tokens (summing to k)."""
    total = 0.0
    for logits in router_logits:
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, TOPK, dim=-1).indices
        f = torch.nn.functional.one_hot(top, EXPERTS).float().sum(dim=1).mean(dim=0)
        total = total + COEF * EXPERTS * (f * probs.mean(dim=0)).sum()
    return total


def write_config(tmp, name, data, load, steps, extra=""):
    return interop.write_config(tmp, name, data, load, steps, extra)


def metrics_record(path, step):
    with open(path) as f:
        for record in map(json.loads, f):
            if record.get("step") == step and "loss" in record:
                return record
    sys.exit(f"{path}: no record for step {step}")


def parity(tools, tmp, data, tokens, family):
    maker = FAMILIES[family]
    model = make(maker, torch.float32)
    hf = os.path.join(tmp, f"{family}_parity_hf")
    model.save_pretrained(hf, safe_serialization=True)

    out = model(tokens[:, :SEQ], output_router_logits=True)
    lm = torch.nn.functional.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), tokens[:, 1:].reshape(-1))
    aux = aux_per_layer(out.router_logits, tokens)
    (lm + aux).backward()
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(grads[k])
    grads_hf, grads_ckpt = os.path.join(tmp, f"{family}_grads_hf"), os.path.join(tmp, f"{family}_grads_ckpt")
    model.save_pretrained(grads_hf, safe_serialization=True)
    run(tools.convert, "--input", grads_hf, "--output", grads_ckpt)
    want = read_checkpoint(grads_ckpt)

    # global_batch = micro_batch: the step's one micro-batch carries the whole load-balancing loss.
    config = write_config(tmp, f"{family}_grads", data, hf, steps=1)
    metrics, dump = os.path.join(tmp, f"{family}_grads.jsonl"), os.path.join(tmp, f"{family}.grads")
    run(tools.megahost, "--config", config, "--metrics_out", metrics, "--grads_out", dump)
    record = metrics_record(metrics, 1)
    got = read_grads(dump)
    assert got.keys() == want.keys(), set(got) ^ set(want)
    worst = max((relative(got[k], want[k].reshape(-1)), k) for k in got)
    lm_error = abs(record["loss"] - lm.item()) / lm.item()
    aux_error = abs(record["moe_aux_loss"] - aux.item()) / aux.item()
    print(f"{family}: LM loss {lm.item():.6f}, relative error {lm_error:.1e}; load-balancing loss {aux.item():.6f}, "
          f"relative error {aux_error:.1e}; {len(got)} gradients, worst relative error {worst[0]:.1e} ({worst[1]})")
    assert lm_error <= LOSS_TOLERANCE and aux_error <= LOSS_TOLERANCE and worst[0] <= TOLERANCE, \
        (lm_error, aux_error, worst)
    interop.check_evaluate(tools, tmp, family, data, hf, lm.item())

    # Three steps on two pipeline stages, exported; transformers' LM loss on
    # the export against Megahost's at those weights (step 4's, on one rank).
    trained = os.path.join(tmp, f"{family}_trained")
    config = write_config(tmp, f"{family}_train", data, hf, steps=3, extra=f'dir = "{trained}"')
    run(tools.megahost, "--config", config, "comm.world_size=2", "parallel.pipeline.size=2",
        "--metrics_out", os.path.join(tmp, f"{family}_train.jsonl"))
    step3 = os.path.join(trained, "step_000000003")
    config = write_config(tmp, f"{family}_step4", data, step3, steps=4)
    metrics = os.path.join(tmp, f"{family}_step4.jsonl")
    run(tools.megahost, "--config", config, "model.dropout=0", "model.attention_dropout=0", "--metrics_out", metrics)
    exported = os.path.join(tmp, f"{family}_exported")
    run(tools.convert, "--input", step3, "--output", exported)
    with torch.no_grad():
        theirs = interop.loss_of(type(model).from_pretrained(exported).eval(), tokens).item()
    ours = metrics_record(metrics, 4)["loss"]
    error = abs(theirs - ours) / ours
    print(f"{family}: after 3 steps on 2 stages, Megahost's loss {ours:.6f}, transformers' on the export "
          f"{theirs:.6f} (relative error {error:.1e})")
    assert error <= LOSS_TOLERANCE and abs(theirs - lm.item()) > 1e-3, (ours, theirs)


def generation(tools, tmp, family):
    import transformers_generate as gen
    model = make(lambda dtype: FAMILIES[family](dtype, vocab=gen.BYTE_IDS), torch.float32)
    model.generation_config.eos_token_id = None
    hf = os.path.join(tmp, f"{family}_generate_hf")
    model.save_pretrained(hf, safe_serialization=True)
    want = [gen.transformers_ids(model, p) for p in gen.PROMPTS]
    got = gen.megahost_ids(tools, gen.write_config(tmp, family, hf), [], os.path.join(tmp, f"{family}_gen.jsonl"))
    assert got == want, f"megahost {got}\ntransformers {want}"
    print(f"{family}: {len(want)} prompts x {gen.NEW} greedy tokens, the same ids as transformers")


def main():
    ap = argparse.ArgumentParser()
    for tool in ("convert", "megahost", "prepare", "ckpt"):
        ap.add_argument(f"--{tool}", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="mixtral")
    tools = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.bfloat16):
            interop.round_trip(tools, tmp, tools.family, FAMILIES[tools.family], dtype)
        data, tokens = interop.prepare_dataset(tools, tmp)
        parity(tools, tmp, data, tokens, tools.family)
        generation(tools, tmp, tools.family)


if __name__ == "__main__":
    main()
