#include "convert/hf_gpt2.hpp"

namespace mh::convert {

std::vector<Link> gpt2_links(const ckpt::ModelShape& m) {
  using enum Transform;
  std::vector<Link> links = {{"wte", {"wte.weight"}, kVocab}, {"wpe", {"wpe.weight"}, kPositions}};
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string mh = "layers." + std::to_string(l) + ".", hf = "h." + std::to_string(l) + ".";
    const std::vector<Link> layer = {
        {mh + "ln1_w", {hf + "ln_1.weight"}, kSame},        {mh + "ln1_b", {hf + "ln_1.bias"}, kSame},
        {mh + "qkv_w", {hf + "attn.c_attn.weight"}, kFusedQkv}, {mh + "qkv_b", {hf + "attn.c_attn.bias"}, kFusedQkv},
        {mh + "proj_w", {hf + "attn.c_proj.weight"}, kTranspose}, {mh + "proj_b", {hf + "attn.c_proj.bias"}, kSame},
        {mh + "ln2_w", {hf + "ln_2.weight"}, kSame},        {mh + "ln2_b", {hf + "ln_2.bias"}, kSame},
        {mh + "fc1_w", {hf + "mlp.c_fc.weight"}, kTranspose}, {mh + "fc1_b", {hf + "mlp.c_fc.bias"}, kSame},
        {mh + "fc2_w", {hf + "mlp.c_proj.weight"}, kTranspose}, {mh + "fc2_b", {hf + "mlp.c_proj.bias"}, kSame},
    };
    links.insert(links.end(), layer.begin(), layer.end());
  }
  links.push_back({"lnf_w", {"ln_f.weight"}, kSame});
  links.push_back({"lnf_b", {"ln_f.bias"}, kSame});
  if (!m.tie_embeddings) links.push_back({"lm_head", {"lm_head.weight"}, kVocab});
  return links;
}

}  // namespace mh::convert
