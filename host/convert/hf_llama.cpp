#include "convert/hf_llama.hpp"

#include "convert/hf_config.hpp"

namespace mh::convert {

std::vector<Link> llama_links(const ckpt::ModelShape& m) {
  using enum Transform;
  const HfClass cls = hf_class(m);
  std::vector<Link> links = {{"wte", {"embed_tokens.weight"}, kVocab}};
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string mh = "layers." + std::to_string(l) + ".", hf = "layers." + std::to_string(l) + ".";
    const std::string attn = hf + "self_attn.", mlp = hf + "mlp.";
    auto linear = [&](const std::string& name, const std::string& hf_name, Transform t = kSame) {
      links.push_back({mh + name + "_w", {hf_name + ".weight"}, t});
      if (m.bias) links.push_back({mh + name + "_b", {hf_name + ".bias"}, t});
    };
    links.push_back({mh + "ln1_w", {hf + "input_layernorm.weight"}, kSame});
    links.push_back({mh + "qkv_w", {attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"}, kSplitQkv});
    if (m.bias || m.qkv_bias)
      links.push_back({mh + "qkv_b", {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"}, kSplitQkv});
    linear("proj", attn + "o_proj");
    links.push_back({mh + "ln2_w", {hf + "post_attention_layernorm.weight"}, kSame});
    if (cls == HfClass::kMixtral) {
      // Mixtral: the router, then w1 (gate), w3 (up) and w2 (down) of each expert.
      const std::string moe = hf + "block_sparse_moe.";
      links.push_back({mh + "router_w", {moe + "gate.weight"}, kSame});
      for (const auto& [name, w] : {std::pair{"gate_w", "w1"}, std::pair{"fc1_w", "w3"}, std::pair{"fc2_w", "w2"}}) {
        std::vector<std::string> experts;
        for (int64_t e = 0; e < m.experts; ++e) experts.push_back(moe + "experts." + std::to_string(e) + "." + w + ".weight");
        links.push_back({mh + name, std::move(experts), kStack});
      }
      continue;
    }
    if (cls == HfClass::kQwen2Moe) {
      // Qwen2-MoE: the router, each expert's gate, up and down projections,
      // the shared expert's and its sigmoid gate.
      links.push_back({mh + "router_w", {mlp + "gate.weight"}, kSame});
      for (const auto& [name, w] :
           {std::pair{"gate_w", "gate_proj"}, std::pair{"fc1_w", "up_proj"}, std::pair{"fc2_w", "down_proj"}}) {
        std::vector<std::string> experts;
        for (int64_t e = 0; e < m.experts; ++e) experts.push_back(mlp + "experts." + std::to_string(e) + "." + w + ".weight");
        links.push_back({mh + name, std::move(experts), kStack});
        links.push_back({mh + "shared_" + name, {mlp + "shared_expert." + w + ".weight"}, kSame});
      }
      links.push_back({mh + "shared_expert_gate_w", {mlp + "shared_expert_gate.weight"}, kSame});
      continue;
    }
    linear("gate", mlp + "gate_proj");
    linear("fc1", mlp + "up_proj");
    linear("fc2", mlp + "down_proj");
  }
  links.push_back({"lnf_w", {"norm.weight"}, kSame});
  if (!m.tie_embeddings) links.push_back({"lm_head", {"lm_head.weight"}, kVocab});
  return links;
}

}  // namespace mh::convert
