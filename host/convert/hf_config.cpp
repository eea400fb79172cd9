#include "convert/hf_config.hpp"

#include <megahost/error.hpp>

#include <cmath>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>

#include "checkpoint/json_limits.hpp"
#include "config/schema.hpp"
#include "data/regular_file.hpp"

namespace mh::convert {
namespace {

using json = nlohmann::json;

// Reads config.json fields with the class's defaults, naming the file and
// field in every error.
class Fields {
 public:
  Fields(const json& j, const std::string& path) : j_(j), path_(path) {}

  int64_t count(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return required(key, fallback);
    require(v->is_number_integer() && v->get<int64_t>() > 0 && v->get<int64_t>() <= int64_t(1) << 40,
            where(key) + " must be a positive integer, got " + v->dump());
    return v->get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    require(v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() >= 0,
            where(key) + " must be a non-negative number, got " + v->dump());
    return v->get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    require(v->is_boolean(), where(key) + " must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    const json* v = find(key);
    if (v == nullptr || v->is_null()) return fallback;
    require(v->is_string(), where(key) + " must be a string, got " + v->dump());
    return v->get<std::string>();
  }
  bool present(const char* key) const { return find(key) != nullptr && !find(key)->is_null(); }
  std::string where(const char* key) const { return path_ + ": \"" + key + "\""; }
  const json* find(const char* key) const { return j_.contains(key) ? &j_.at(key) : nullptr; }

 private:
  int64_t required(const char* key, std::optional<int64_t> fallback) const {
    require(fallback.has_value(), path_ + ": missing \"" + key + "\"; a config.json saved by transformers has it");
    return *fallback;
  }
  const json& j_;
  const std::string& path_;
};

void require_value(bool ok, const Fields& f, const char* key, const std::string& why) {
  require(ok, f.where(key) + ": " + why);
}

HfModel parse_gpt2(const Fields& f) {
  HfModel hf;
  hf.cls = HfClass::kGpt2;
  ckpt::ModelShape& m = hf.shape;
  m.arch = "gpt2";
  m.layers = f.count("n_layer", 12);
  m.hidden = f.count("n_embd", 768);
  m.heads = f.count("n_head", 12);
  m.ffn = f.count("n_inner", 4 * m.hidden);
  m.seq_len = f.count("n_positions", 1024);
  m.vocab_size = f.count("vocab_size", 50257);
  m.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  m.tie_embeddings = f.flag("tie_word_embeddings", true);
  const std::string act = f.text("activation_function", "gelu_new");
  require_value(act == "gelu_new" || act == "gelu_pytorch_tanh", f, "activation_function",
                "is \"" + act + "\"; Megahost's GeLU is the tanh approximation (\"gelu_new\"), so only that converts");
  require_value(f.flag("scale_attn_weights", true), f, "scale_attn_weights",
                "false is not supported: Megahost scales attention scores by 1/sqrt(head size)");
  require_value(!f.flag("scale_attn_by_inverse_layer_idx", false), f, "scale_attn_by_inverse_layer_idx",
                "true is not supported (Megahost does not scale by layer)");
  require_value(!f.flag("add_cross_attention", false), f, "add_cross_attention", "true is not supported (a decoder only)");
  hf.dropout = f.number("resid_pdrop", 0.1);
  hf.attention_dropout = f.number("attn_pdrop", 0.1);
  return hf;
}

// RoPE's base. transformers 4 writes "rope_theta" and "rope_scaling" at the
// top level; transformers 5 writes "rope_parameters": {"rope_type",
// "rope_theta", ...}. Both are read, so a model saved by either converts with
// its own base, never silently with the class default; only unscaled RoPE
// ("default") is Megahost's.
double rope_theta(const Fields& f, double class_default) {
  double theta = f.number("rope_theta", class_default);
  require_value(!f.present("rope_scaling"), f, "rope_scaling",
                "is set; Megahost's RoPE has no scaling: convert a model without it");
  const json* parameters = f.find("rope_parameters");
  if (parameters == nullptr || parameters->is_null()) return theta;
  const std::string where = f.where("rope_parameters");
  require(parameters->is_object(), where + " must be an object, got " + parameters->dump());
  const Fields rope(*parameters, where);
  const std::string type = rope.text("rope_type", "default");
  require(type == "default", rope.where("rope_type") + " is \"" + type +
                                 "\"; Megahost's RoPE has no scaling (\"default\"): convert a model without it");
  if (!rope.present("rope_theta")) return theta;
  const double nested = rope.number("rope_theta", theta);
  require(!f.present("rope_theta") || nested == theta,
          where + ": \"rope_theta\" differs from the top-level \"rope_theta\"; which base the model has is unclear");
  return nested;
}

// A Llama-family class's defaults for the fields every such class has.
struct LlamaDefaults {
  int64_t layers = 32, hidden = 4096, heads = 32, kv_heads = 0 /* 0: heads */, ffn = 11008, positions = 2048,
          vocab = 32000, head_dim = 0 /* 0: hidden_size / num_attention_heads */;
  double norm_eps = 1e-6, rope_theta = 10000;
};

// What every Llama-family class shares: RMSNorm, RoPE and SwiGLU, their
// sizes, and the checks that Megahost computes the model the file describes.
HfModel parse_llama_family(const Fields& f, HfClass cls, const LlamaDefaults& d) {
  HfModel hf;
  hf.cls = cls;
  ckpt::ModelShape& m = hf.shape;
  m.arch = "llama";
  m.normalization = "rmsnorm";
  m.position = "rope";
  m.activation = "swiglu";
  m.bias = false;
  m.layers = f.count("num_hidden_layers", d.layers);
  m.hidden = f.count("hidden_size", d.hidden);
  m.heads = f.count("num_attention_heads", d.heads);
  m.kv_heads = f.count("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : m.heads);
  m.ffn = f.count("intermediate_size", d.ffn);
  m.seq_len = f.count("max_position_embeddings", d.positions);
  m.max_positions = m.seq_len;
  m.vocab_size = f.count("vocab_size", d.vocab);
  m.norm_eps = f.number("rms_norm_eps", d.norm_eps);
  m.rope_theta = rope_theta(f, d.rope_theta);
  m.tie_embeddings = f.flag("tie_word_embeddings", false);
  const std::string act = f.text("hidden_act", "silu");
  require_value(act == "silu", f, "hidden_act", "is \"" + act + "\"; Megahost's swiglu gates with SiLU (\"silu\")");
  // transformers takes a null or absent head_dim as hidden_size / num_attention_heads
  // unless the class has a default of its own (Qwen3's 128).
  const bool derived = !f.present("head_dim") && d.head_dim == 0;
  require_value(!derived || m.hidden % m.heads == 0, f, "hidden_size",
                "is not divisible by num_attention_heads = " + std::to_string(m.heads) +
                    "; without \"head_dim\" a head is hidden_size / num_attention_heads wide");
  m.head_size = derived ? m.hidden / m.heads : f.count("head_dim", d.head_dim);
  require_value(m.head_size % 2 == 0, f, "head_dim",
                "is " + std::to_string(m.head_size) + ", odd; RoPE rotates pairs of a head's features");
  require_value(m.kv_heads <= m.heads && m.heads % m.kv_heads == 0, f, "num_key_value_heads",
                "must divide num_attention_heads");
  hf.attention_dropout = f.number("attention_dropout", 0);
  return hf;
}

HfModel parse_llama(const Fields& f, const LlamaDefaults& defaults = {}) {
  HfModel hf = parse_llama_family(f, HfClass::kLlama, defaults);
  hf.shape.bias = f.flag("attention_bias", false);
  require_value(f.flag("mlp_bias", false) == hf.shape.bias, f, "mlp_bias",
                "differs from attention_bias; Megahost's model.bias puts biases on every linear layer or none");
  return hf;
}

// Qwen's classes may window some layers' attention; Megahost's is full.
void require_full_attention(const Fields& f) {
  require_value(!f.flag("use_sliding_window", false), f, "use_sliding_window",
                "is true; Megahost's attention is full causal attention: convert a model without a window");
}

// Llama with biases on q, k and v alone (none on o_proj and the MLP); the
// class has no field for them.
HfModel parse_qwen2(const Fields& f) {
  HfModel hf = parse_llama(f, {.ffn = 22016, .positions = 32768, .vocab = 151936});
  hf.cls = HfClass::kQwen2;
  hf.shape.bias = false;
  hf.shape.qkv_bias = true;
  require_full_attention(f);
  return hf;
}

// A mixture's router: the softmax's top num_experts_per_tok of `experts`,
// renormalised over them when `norm_topk`.
void parse_router(const Fields& f, ckpt::ModelShape& m, int64_t experts, int64_t topk, bool norm_topk) {
  m.experts = experts;
  m.router_topk = f.count("num_experts_per_tok", topk);
  m.router_norm_topk = norm_topk;
  m.router_aux_loss_coef = f.number("router_aux_loss_coef", 0.001);
  require_value(m.router_topk <= m.experts, f, "num_experts_per_tok", "must be at most the number of experts");
}

// Qwen's mixtures may leave some layers dense or windowed; Megahost's have
// experts in every layer and full causal attention.
void require_every_layer_a_full_mixture(const Fields& f) {
  require_value(f.count("decoder_sparse_step", 1) == 1, f, "decoder_sparse_step",
                "is not 1; Megahost's mixture of experts is in every layer (no dense layers between)");
  const json* dense = f.find("mlp_only_layers");
  require_value(dense == nullptr || dense->is_null() || (dense->is_array() && dense->empty()), f, "mlp_only_layers",
                "lists layers; Megahost's mixture of experts is in every layer (no dense layers among them)");
  require_full_attention(f);
}

// Llama's attention and norms with a mixture of SwiGLU experts: the router
// takes the top num_experts_per_tok of the softmax, renormalised.
HfModel parse_mixtral(const Fields& f) {
  HfModel hf = parse_llama_family(f, HfClass::kMixtral,
                                  {.kv_heads = 8, .ffn = 14336, .positions = 4096 * 32, .norm_eps = 1e-5,
                                   .rope_theta = 1e6});
  ckpt::ModelShape& m = hf.shape;
  m.moe_ffn = m.ffn;
  parse_router(f, m, f.count("num_local_experts", 8), 2, true);
  require_value(!f.present("sliding_window"), f, "sliding_window",
                "is set; Megahost's attention is full causal attention: convert a model without a window");
  require_value(f.number("router_jitter_noise", 0) == 0, f, "router_jitter_noise",
                "is not 0; Megahost's router adds no noise");
  return hf;
}

// Llama's attention (with biases on q, k and v under qkv_bias) and norms;
// every layer's MLP a mixture of num_experts SwiGLU experts of
// moe_intermediate_size, the softmax's top num_experts_per_tok (renormalised
// under norm_topk_prob), beside one shared expert of
// shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate).
HfModel parse_qwen2_moe(const Fields& f) {
  HfModel hf = parse_llama_family(f, HfClass::kQwen2Moe,
                                  {.layers = 24, .hidden = 2048, .heads = 16, .ffn = 5632, .positions = 32768,
                                   .vocab = 151936});
  ckpt::ModelShape& m = hf.shape;
  m.qkv_bias = f.flag("qkv_bias", true);  // transformers 4's class always has them, without the field
  m.moe_ffn = f.count("moe_intermediate_size", 1408);
  parse_router(f, m, f.count("num_experts", 60), 4, f.flag("norm_topk_prob", false));
  m.shared_experts = 1;
  m.shared_ffn = f.count("shared_expert_intermediate_size", 5632);
  m.shared_expert_gate = true;
  require_every_layer_a_full_mixture(f);
  return hf;
}

// Qwen3's attention: no biases, QK-norm (RMSNorm over each query and key
// head: self_attn.q_norm, k_norm).
void parse_qwen3_attention(const Fields& f, ckpt::ModelShape& m) {
  m.qk_norm = true;
  require_value(!f.flag("attention_bias", false), f, "attention_bias",
                "is true; Megahost has no biases on q, k, v and o without them on the MLP");
}

// Llama with Qwen3's attention; a head is 128 wide unless head_dim says.
HfModel parse_qwen3(const Fields& f) {
  HfModel hf = parse_llama_family(f, HfClass::kQwen3,
                                  {.ffn = 22016, .positions = 32768, .vocab = 151936, .head_dim = 128});
  parse_qwen3_attention(f, hf.shape);
  require_full_attention(f);
  return hf;
}

// Qwen2-MoE's mixture without the shared expert and without biases, with
// Qwen3's attention.
HfModel parse_qwen3_moe(const Fields& f) {
  HfModel hf = parse_llama_family(f, HfClass::kQwen3Moe,
                                  {.layers = 24, .hidden = 2048, .heads = 32, .kv_heads = 4, .ffn = 6144,
                                   .positions = 32768, .vocab = 151936});
  ckpt::ModelShape& m = hf.shape;
  parse_qwen3_attention(f, m);
  m.moe_ffn = f.count("moe_intermediate_size", 768);
  // transformers 5 writes num_local_experts, transformers 4 num_experts.
  const int64_t experts = f.present("num_local_experts") ? f.count("num_local_experts") : f.count("num_experts", 128);
  parse_router(f, m, experts, 8, f.flag("norm_topk_prob", false));
  require_every_layer_a_full_mixture(f);
  return hf;
}

std::string model_type(const json& j, const std::string& path) {
  if (j.contains("model_type") && j["model_type"].is_string()) return j["model_type"].get<std::string>();
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const json& a : j["architectures"]) {
      if (a == "GPT2LMHeadModel" || a == "GPT2Model") return "gpt2";
      if (a == "LlamaForCausalLM" || a == "LlamaModel") return "llama";
      if (a == "MixtralForCausalLM" || a == "MixtralModel") return "mixtral";
      if (a == "Qwen2ForCausalLM" || a == "Qwen2Model") return "qwen2";
      if (a == "Qwen2MoeForCausalLM" || a == "Qwen2MoeModel") return "qwen2_moe";
      if (a == "Qwen3ForCausalLM" || a == "Qwen3Model") return "qwen3";
      if (a == "Qwen3MoeForCausalLM" || a == "Qwen3MoeModel") return "qwen3_moe";
    }
  throw Error(MH_INVALID_ARGUMENT, path + ": no \"model_type\" (nor a known \"architectures\"); Megahost converts "
                                          "\"gpt2\" (GPT2LMHeadModel), \"llama\" (LlamaForCausalLM), \"qwen2\" "
                                          "(Qwen2ForCausalLM), \"qwen3\" (Qwen3ForCausalLM), \"mixtral\" (MixtralForCausalLM), \"qwen2_moe\" "
                                          "(Qwen2MoeForCausalLM) and \"qwen3_moe\" (Qwen3MoeForCausalLM)");
}

// A special token id: an integer, a list of them (Llama 3's eos), or null.
json special_id(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return nullptr;
  const json& v = j[key];
  bool ok = v.is_number_integer();
  if (v.is_array()) {
    ok = !v.empty();
    for (const json& e : v) ok = ok && e.is_number_integer();
  }
  require(ok, path + ": \"" + key + "\" must be a token id or a list of them, got " + v.dump());
  return v;
}

// The ranges megahost's own [model] keys take (config/schema.cpp), so that a
// model megahost_convert writes is one megahost runs: each value the file
// gives a [model] key is checked against that key's bounds.
const MH_OptionSpec* model_spec(const std::string& key) {
  for (const HostSection& section : host_sections())
    if (std::string(section.name) == "model")
      for (const MH_OptionSpec& spec : section.specs)
        if (key == spec.name) return &spec;
  return nullptr;
}

void check_model_ranges(const std::vector<ModelKey>& keys, const std::string& path) {
  for (const ModelKey& k : keys) {
    const MH_OptionSpec* spec = model_spec(k.key);
    if (spec == nullptr || !k.value.is_number()) continue;
    const double v = k.value.get<double>();
    const bool low = (spec->flags & MH_OPTION_HAS_MIN) && v < spec->min;
    const bool high = (spec->flags & MH_OPTION_HAS_MAX) && v > spec->max;
    std::ostringstream range;
    range << spec->min << " to " << spec->max;
    require(!low && !high, path + ": \"" + k.field + "\" = " + k.field_value.dump() + " is outside what model." +
                               k.key + " takes (" + range.str() + "); megahost could not run this model");
  }
}

}  // namespace

const char* class_name(HfClass c) {
  switch (c) {
    case HfClass::kGpt2: return "GPT2LMHeadModel";
    case HfClass::kLlama: return "LlamaForCausalLM";
    case HfClass::kMixtral: return "MixtralForCausalLM";
    case HfClass::kQwen2: return "Qwen2ForCausalLM";
    case HfClass::kQwen3: return "Qwen3ForCausalLM";
    case HfClass::kQwen2Moe: return "Qwen2MoeForCausalLM";
    case HfClass::kQwen3Moe: return "Qwen3MoeForCausalLM";
  }
  return "";
}

HfModel parse_hf_config(std::string_view text, const std::string& path) {
  const json j = parse_json_limited(text, path, 16);
  require(j.is_object(), path + ": not a JSON object; a Hugging Face config.json is one");
  const std::string type = model_type(j, path);
  const Fields f(j, path);
  require(type == "gpt2" || type == "llama" || type == "qwen2" || type == "qwen3" || type == "mixtral" ||
              type == "qwen2_moe" || type == "qwen3_moe",
          path + ": \"model_type\" is \"" + type +
              "\"; Megahost converts \"gpt2\", \"llama\", \"qwen2\", \"qwen3\", \"mixtral\", \"qwen2_moe\" "
              "and \"qwen3_moe\" models");
  HfModel hf = type == "gpt2"      ? parse_gpt2(f)
               : type == "llama"   ? parse_llama(f)
               : type == "qwen2"   ? parse_qwen2(f)
               : type == "qwen3"   ? parse_qwen3(f)
               : type == "mixtral"   ? parse_mixtral(f)
               : type == "qwen2_moe" ? parse_qwen2_moe(f)
                                     : parse_qwen3_moe(f);
  hf.bos_token_id = special_id(j, "bos_token_id", path);
  hf.eos_token_id = special_id(j, "eos_token_id", path);
  ckpt::ModelShape& m = hf.shape;
  require(m.head_size > 0 || m.hidden % m.heads == 0, path + ": the hidden size " + std::to_string(m.hidden) +
                                                          " is not divisible by the number of heads " +
                                                          std::to_string(m.heads));
  m.vocab = ckpt::padded_vocab(m.vocab_size);
  check_model_ranges(model_keys(hf), path);
  return hf;
}

HfModel read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return parse_hf_config(data::read_regular_file(path, "a Hugging Face model folder holds config.json"), path);
}

HfClass hf_class(const ckpt::ModelShape& m) {
  const bool gpt2 = m.normalization == "layernorm" && m.position == "learned" && m.activation == "gelu";
  const bool llama = m.normalization == "rmsnorm" && m.position == "rope" && m.activation == "swiglu";
  const std::string keys = "model.normalization = \"" + m.normalization + "\", position = \"" + m.position +
                           "\", activation = \"" + m.activation + "\"";
  require(gpt2 || llama, keys + ": neither GPT2LMHeadModel (layernorm, learned, gelu) nor LlamaForCausalLM "
                                "(rmsnorm, rope, swiglu) computes this combination");
  require(!m.qk_norm || (llama && m.shared_experts == 0 && !m.bias && !m.qkv_bias),
          "model.qk_norm = true exports as Qwen3ForCausalLM or Qwen3MoeForCausalLM, neither of which has shared "
          "experts or biases; set shared_experts = 0, bias = false and qkv_bias = false");
  if (m.qk_norm) return m.experts > 0 ? HfClass::kQwen3Moe : HfClass::kQwen3;
  if (llama && m.experts > 0) {
    require(!m.bias, "model.experts > 0 with model.bias = true: neither MixtralForCausalLM nor Qwen2MoeForCausalLM "
                     "has biases on its MLP or output projection");
    if (m.shared_experts == 0) {
      require(m.router_norm_topk && !m.qkv_bias,
              "model.experts > 0 without shared experts is MixtralForCausalLM's layout, which renormalises the top-k "
              "gates and has no QKV biases; set router_norm_topk = true and qkv_bias = false (or add Qwen2-MoE's "
              "shared expert: shared_experts = 1, shared_expert_gate = true)");
      return HfClass::kMixtral;
    }
    require(m.shared_experts == 1 && m.shared_expert_gate,
            "model.shared_experts = " + std::to_string(m.shared_experts) + ", shared_expert_gate = " +
                (m.shared_expert_gate ? "true" : "false") +
                ": Qwen2MoeForCausalLM has one shared expert behind a sigmoid gate; set shared_experts = 1 and "
                "shared_expert_gate = true");
    return HfClass::kQwen2Moe;
  }
  if (llama && m.qkv_bias && !m.bias) return HfClass::kQwen2;
  if (llama) return HfClass::kLlama;
  require(m.bias, "model.bias = false: GPT2LMHeadModel has biases on every linear layer; export a model with bias = true");
  require(m.kv() == m.heads, "model.kv_heads = " + std::to_string(m.kv_heads) +
                                 ": GPT2LMHeadModel has no grouped-query attention (kv_heads must equal heads)");
  require(m.derived_head_dim(), "model.head_dim = " + std::to_string(m.head_dim()) +
                                    ": GPT2LMHeadModel's heads are hidden / heads wide; set head_dim = 0");
  return HfClass::kGpt2;
}

namespace {

// What every Llama-family class's config.json holds alike.
void write_llama_family(nlohmann::ordered_json& j, const ckpt::ModelShape& m, HfClass cls) {
  j["model_type"] = cls == HfClass::kMixtral    ? "mixtral"
                    : cls == HfClass::kQwen2    ? "qwen2"
                    : cls == HfClass::kQwen3    ? "qwen3"
                    : cls == HfClass::kQwen2Moe ? "qwen2_moe"
                    : cls == HfClass::kQwen3Moe ? "qwen3_moe"
                                                : "llama";
  j["hidden_act"] = "silu";
  j["num_hidden_layers"] = m.layers;
  j["hidden_size"] = m.hidden;
  j["num_attention_heads"] = m.heads;
  j["num_key_value_heads"] = m.kv();
  j["head_dim"] = m.head_dim();
  j["intermediate_size"] = m.ffn;
  j["max_position_embeddings"] = m.positions();
  j["rms_norm_eps"] = m.norm_eps;
  j["rope_theta"] = m.rope_theta;
  j["rope_scaling"] = nullptr;
}

// A mixture's router, as parse_router reads it back.
void write_router(nlohmann::ordered_json& j, const ckpt::ModelShape& m) {
  j["num_experts_per_tok"] = m.router_topk;
  j["router_aux_loss_coef"] = m.router_aux_loss_coef;
  j["output_router_logits"] = m.router_aux_loss_coef > 0;
}

// Qwen's fields saying every layer is a mixture under full attention.
void write_every_layer_a_full_mixture(nlohmann::ordered_json& j) {
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = json::array();
  j["use_sliding_window"] = false;
}

}  // namespace

std::string hf_config_json(const ckpt::ModelShape& m, const std::string& torch_dtype, const json& special) {
  nlohmann::ordered_json j;
  const HfClass cls = hf_class(m);
  j["architectures"] = {class_name(cls)};
  if (cls == HfClass::kGpt2) {
    j["model_type"] = "gpt2";
    j["activation_function"] = "gelu_new";
    j["n_layer"] = m.layers;
    j["n_embd"] = m.hidden;
    j["n_head"] = m.heads;
    j["n_inner"] = m.ffn;
    j["n_positions"] = m.seq_len;
    j["layer_norm_epsilon"] = m.norm_eps;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
  } else {
    write_llama_family(j, m, cls);
    switch (cls) {
      case HfClass::kMixtral:
        j["intermediate_size"] = m.moe_ffn;
        j["num_local_experts"] = m.experts;
        write_router(j, m);
        j["router_jitter_noise"] = 0.0;
        j["sliding_window"] = nullptr;
        break;
      case HfClass::kQwen2:
        j["use_sliding_window"] = false;
        break;
      case HfClass::kQwen3:
        j["use_sliding_window"] = false;
        j["attention_bias"] = false;
        break;
      case HfClass::kQwen3Moe:
        j["moe_intermediate_size"] = m.moe_ffn;
        j["num_experts"] = m.experts;
        j["norm_topk_prob"] = m.router_norm_topk;
        write_router(j, m);
        write_every_layer_a_full_mixture(j);
        j["attention_bias"] = false;
        break;
      case HfClass::kQwen2Moe:
        j["moe_intermediate_size"] = m.moe_ffn;
        j["shared_expert_intermediate_size"] = m.shared_width();
        j["num_experts"] = m.experts;
        j["norm_topk_prob"] = m.router_norm_topk;
        write_router(j, m);
        write_every_layer_a_full_mixture(j);
        j["qkv_bias"] = m.qkv_bias;
        break;
      default:
        j["attention_bias"] = m.bias;
        j["mlp_bias"] = m.bias;
    }
  }
  j["vocab_size"] = m.vocab_size;
  j["tie_word_embeddings"] = m.tie_embeddings;
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (special.is_object() && special.contains(key) && !special[key].is_null()) j[key] = special[key];
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

std::vector<ModelKey> sentencepiece_tokenizer_keys(const std::string& dir) {
  auto keys = [](const std::string& name, const std::string& file) {
    const std::string field = std::filesystem::path(file).filename().string();
    return std::vector<ModelKey>{{"tokenizer", name, field, name, ModelKey::kDefault, false, "data"},
                                 {"tokenizer_file", file, field, file, ModelKey::kDefault, false, "data", true}};
  };
  std::error_code ec;
  const std::string json_file = dir + "/tokenizer.json", model_file = dir + "/tokenizer.model";
  if (std::filesystem::is_regular_file(json_file, ec)) {
    const json root = json::parse(data::read_regular_file(json_file, "a tokenizer.json"), nullptr, false);
    const bool fallback = root.is_object() && root.contains("model") && root["model"].is_object() &&
                          root["model"].value("byte_fallback", false) == true;
    return fallback ? keys("huggingface", json_file) : std::vector<ModelKey>{};
  }
  if (std::filesystem::is_regular_file(model_file, ec)) return keys("sentencepiece", model_file);
  return {};
}

std::vector<ModelKey> model_keys(const HfModel& hf) {
  const ckpt::ModelShape& m = hf.shape;
  const bool gpt2 = hf.cls == HfClass::kGpt2;
  auto pick = [gpt2](const char* gpt2_name, const char* llama_name) { return std::string(gpt2 ? gpt2_name : llama_name); };
  const int64_t derived_ffn = m.activation == "swiglu" ? ckpt::swiglu_ffn(m.hidden) : 4 * m.hidden;
  std::vector<ModelKey> keys;
  auto add = [&](const char* key, json value, std::string hf_field, ModelKey::Rule rule = ModelKey::kEqual,
                 bool zero_means_this = false) {
    keys.push_back({key, value, std::move(hf_field), value, rule, zero_means_this});
  };
  // Keys the class itself fixes: config.json names them through model_type.
  auto by_class = [&](const char* key, json value) {
    keys.push_back({key, std::move(value), "model_type", m.arch, ModelKey::kEqual, false});
  };
  by_class("arch", m.arch);
  add("layers", m.layers, pick("n_layer", "num_hidden_layers"));
  add("hidden", m.hidden, pick("n_embd", "hidden_size"));
  add("heads", m.heads, pick("n_head", "num_attention_heads"));
  add("kv_heads", m.kv(), pick("n_head", "num_key_value_heads"), ModelKey::kEqual, m.kv() == m.heads);
  if (!gpt2) add("head_dim", m.head_dim(), "head_dim", ModelKey::kEqual, m.derived_head_dim());
  add("ffn_hidden", m.ffn, pick("n_inner", "intermediate_size"), ModelKey::kEqual, m.ffn == derived_ffn);
  add("seq_len", m.seq_len, pick("n_positions", "max_position_embeddings"), ModelKey::kAtMost);
  // Rotary positions serve a shorter fine-tune and still the model's whole length.
  if (!gpt2) add("max_positions", m.seq_len, "max_position_embeddings");
  add("vocab", m.vocab_size, "vocab_size");
  add("layernorm_eps", m.norm_eps, pick("layer_norm_epsilon", "rms_norm_eps"));
  by_class("normalization", m.normalization);
  by_class("position", m.position);
  by_class("activation", m.activation);
  add("tie_embeddings", m.tie_embeddings, "tie_word_embeddings");
  if (gpt2) by_class("bias", true);
  else if (hf.cls == HfClass::kLlama) add("bias", m.bias, "attention_bias");
  else by_class("bias", false);
  if (!gpt2) add("rope_theta", m.rope_theta, "rope_theta");
  if (hf.cls == HfClass::kMixtral) {
    add("experts", m.experts, "num_local_experts");
    add("router_topk", m.router_topk, "num_experts_per_tok");
    add("moe_ffn_hidden", m.moe_ffn, "intermediate_size", ModelKey::kEqual, m.moe_ffn == m.ffn);
    by_class("router_norm_topk", true);
    add("router_aux_loss_coef", m.router_aux_loss_coef, "router_aux_loss_coef", ModelKey::kDefault);
  }
  if (hf.cls == HfClass::kQwen2) by_class("qkv_bias", true);
  if (hf.cls == HfClass::kQwen2Moe || hf.cls == HfClass::kQwen3Moe) {
    add("experts", m.experts, "num_experts");
    add("router_topk", m.router_topk, "num_experts_per_tok");
    add("moe_ffn_hidden", m.moe_ffn, "moe_intermediate_size");
    add("router_norm_topk", m.router_norm_topk, "norm_topk_prob");
    add("router_aux_loss_coef", m.router_aux_loss_coef, "router_aux_loss_coef", ModelKey::kDefault);
  }
  if (hf.cls == HfClass::kQwen3 || hf.cls == HfClass::kQwen3Moe) by_class("qk_norm", true);
  if (hf.cls == HfClass::kQwen2Moe) {
    add("qkv_bias", m.qkv_bias, "qkv_bias");
    by_class("shared_experts", 1);
    add("shared_expert_ffn_hidden", m.shared_ffn, "shared_expert_intermediate_size");
    by_class("shared_expert_gate", true);
  }
  add("dropout", hf.dropout, pick("resid_pdrop", "model_type"), ModelKey::kDefault);
  add("attention_dropout", hf.attention_dropout, pick("attn_pdrop", "attention_dropout"), ModelKey::kDefault);
  return keys;
}

}  // namespace mh::convert
