#include "checkpoint/model_keys.hpp"

#include <cstdio>
#include <cstdlib>

namespace mh::ckpt {

int64_t swiglu_ffn(int64_t hidden) { return (8 * hidden / 3 + 255) / 256 * 256; }

double shortest_double(float v) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, double(v));
    const double d = std::strtod(text, nullptr);
    if (float(d) == v) return d;
  }
  return double(v);  // 9 significant digits always round-trip a float
}

std::vector<ModelKey> model_keys(const Metadata& meta) {
  const ModelShape& m = meta.model;
  std::vector<ModelKey> keys;
  auto add = [&](const char* key, nlohmann::json value, ModelKey::Rule rule = ModelKey::kEqual,
                 bool zero_means_this = false) {
    keys.push_back({key, value, std::string("model.") + key, value, rule, zero_means_this});
  };
  const int64_t derived_ffn = m.activation == "swiglu" ? swiglu_ffn(m.hidden) : 4 * m.hidden;
  add("arch", m.arch);
  add("layers", m.layers);
  add("hidden", m.hidden);
  add("heads", m.heads);
  add("kv_heads", m.kv(), ModelKey::kEqual, m.kv() == m.heads);
  add("head_dim", m.head_dim(), ModelKey::kEqual, m.derived_head_dim());
  add("ffn_hidden", m.ffn, ModelKey::kEqual, m.ffn == derived_ffn);
  add("seq_len", m.seq_len);
  add("max_positions", m.positions(), ModelKey::kEqual, m.positions() == m.seq_len);
  // The padded vocabulary alone where the checkpoint predates vocab_size.
  if (m.vocab_size > 0) add("vocab", m.vocab_size);
  add("normalization", m.normalization);
  add("position", m.position);
  add("activation", m.activation);
  add("tie_embeddings", m.tie_embeddings);
  add("bias", m.bias);
  add("rope_theta", m.rope_theta);
  if (m.experts > 0) {
    add("experts", m.experts);
    add("router_topk", m.router_topk);
    add("moe_ffn_hidden", m.moe_ffn, ModelKey::kEqual, m.moe_ffn == m.ffn);
    add("router_norm_topk", m.router_norm_topk);
    add("router_aux_loss_coef", m.router_aux_loss_coef, ModelKey::kDefault);
  }
  if (m.shared_experts > 0) {
    add("shared_experts", m.shared_experts);
    add("shared_expert_ffn_hidden", m.shared_ffn, ModelKey::kEqual, m.shared_ffn == m.moe_ffn);
    add("shared_expert_gate", m.shared_expert_gate);
  }
  if (m.qkv_bias) add("qkv_bias", true);
  if (m.qk_norm) add("qk_norm", true);
  keys.push_back({"layernorm_eps", m.norm_eps, "model.norm_eps", m.norm_eps, ModelKey::kEqual, false});
  const nlohmann::json& t = meta.tokenizer;
  for (const char* key : {"tokenizer", "vocab_file", "merges_file", "tokenizer_file"}) {
    const char* field = std::string(key) == "tokenizer" ? "name" : key;
    if (!t.is_object() || !t.contains(field) || !t[field].is_string()) continue;
    keys.push_back({key, t[field], std::string("tokenizer.") + field, t[field], ModelKey::kEqual, false, "data",
                    field != std::string("name")});
  }
  return keys;
}

}  // namespace mh::ckpt
