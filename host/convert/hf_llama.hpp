// LlamaForCausalLM's tensors (names without "model.") against Megahost's:
// q_proj, k_proj and v_proj fused into qkv_w grouped per key/value head.
// Both use the "rotate half" RoPE layout, so q and k rows are not permuted.
// MixtralForCausalLM's are Llama's with block_sparse_moe in place of the
// MLP: the router (gate) and each expert's w1 (gate), w3 (up) and w2 (down),
// which Megahost stacks expert by expert (Transform::kStack).
#pragma once

#include <vector>

#include "convert/tensor_map.hpp"

namespace mh::convert {

std::vector<Link> llama_links(const ckpt::ModelShape& m);

}  // namespace mh::convert
