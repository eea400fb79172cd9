// LlamaForCausalLM's tensors (names without "model.") against Megahost's:
// q_proj, k_proj and v_proj fused into qkv_w grouped per key/value head.
// Both use the "rotate half" RoPE layout, so q and k rows are not permuted.
// Qwen2ForCausalLM's are Llama's with biases on q, k and v alone (qkv_b).
// MixtralForCausalLM's are Llama's with block_sparse_moe in place of the
// MLP: the router (gate) and each expert's w1 (gate), w3 (up) and w2 (down),
// which Megahost stacks expert by expert (Transform::kStack).
// Qwen2MoeForCausalLM's are Llama's with biases on q, k and v alone and mlp
// holding the router (gate), the experts' gate, up and down projections
// (stacked likewise), the shared expert's and its gate (shared_expert_gate).
#pragma once

#include <vector>

#include "convert/tensor_map.hpp"

namespace mh::convert {

std::vector<Link> llama_links(const ckpt::ModelShape& m);

}  // namespace mh::convert
