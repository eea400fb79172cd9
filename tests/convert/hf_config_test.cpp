// config.json: what Megahost reads from GPT2Config and LlamaConfig, what it
// refuses, and what it writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/error.hpp>

#include "convert/hf_config.hpp"
#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

using ::testing::HasSubstr;

std::string refusal(const std::string& text) {
  try {
    parse_hf_config(text, "/m/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, Gpt2FieldsAndClassDefaults) {
  const HfModel hf = parse_hf_config(
      R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "vocab_size": 300, "n_positions": 32})", "c");
  EXPECT_EQ(hf.cls, HfClass::kGpt2);
  const ckpt::ModelShape& m = hf.shape;
  EXPECT_EQ(m.layers, 3);
  EXPECT_EQ(m.hidden, 64);
  EXPECT_EQ(m.ffn, 256);  // n_inner absent: 4 * n_embd
  EXPECT_EQ(m.vocab_size, 300);
  EXPECT_EQ(m.vocab, 384);  // padded to a multiple of 128
  EXPECT_EQ(m.seq_len, 32);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_DOUBLE_EQ(hf.dropout, 0.1);
}

TEST(HfConfig, LlamaFieldsAndClassDefaults) {
  const HfModel hf = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "vocab_size": 256, "rope_theta": 500000.0, "rope_scaling": null, "head_dim": 16})", "c");
  EXPECT_EQ(hf.cls, HfClass::kLlama);
  const ckpt::ModelShape& m = hf.shape;
  EXPECT_EQ(m.kv(), 2);
  EXPECT_EQ(m.normalization, "rmsnorm");
  EXPECT_EQ(m.position, "rope");
  EXPECT_EQ(m.activation, "swiglu");
  EXPECT_FALSE(m.tie_embeddings);
  EXPECT_FALSE(m.bias);
  EXPECT_DOUBLE_EQ(m.rope_theta, 500000);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.seq_len, 2048);
}

// transformers 5 saves RoPE's base inside "rope_parameters"; read as the
// class default 10000 it would be a silently different model.
TEST(HfConfig, RopeParametersOfTransformers5GiveTheBase) {
  const HfModel hf = parse_hf_config(
      R"({"model_type": "llama", "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})", "c");
  EXPECT_DOUBLE_EQ(hf.shape.rope_theta, 500000);
  EXPECT_THAT(refusal(R"({"model_type": "llama", "rope_parameters": {"rope_type": "llama3", "factor": 8.0}})"),
              HasSubstr("/m/config.json: \"rope_parameters\": \"rope_type\" is \"llama3\""));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "rope_theta": 10000, "rope_parameters": {"rope_theta": 500000}})"),
              HasSubstr("differs from the top-level \"rope_theta\""));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "rope_parameters": {"rope_theta": 0}})"),
              HasSubstr("\"rope_theta\" = 0.0 is outside what model.rope_theta takes"));
}

TEST(HfConfig, Qwen2HasBiasesOnQkvAlone) {
  const HfModel hf = parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "intermediate_size": 172, "num_hidden_layers": 2, "vocab_size": 300})", "c");
  EXPECT_EQ(hf.cls, HfClass::kQwen2);
  EXPECT_FALSE(hf.shape.bias);
  EXPECT_TRUE(hf.shape.qkv_bias);
  EXPECT_EQ(hf_class(hf.shape), HfClass::kQwen2);
  EXPECT_THAT(refusal(R"({"model_type": "qwen2", "use_sliding_window": true})"), HasSubstr("\"use_sliding_window\""));
}

TEST(HfConfig, Qwen2MoeFieldsAndWhatItRefuses) {
  const std::string base = R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "intermediate_size": 56, "moe_intermediate_size": 48,
      "shared_expert_intermediate_size": 40, "num_hidden_layers": 2, "vocab_size": 300, "num_experts": 4,
      "num_experts_per_tok": 2)";
  const HfModel hf = parse_hf_config(base + "}", "c");
  EXPECT_EQ(hf.cls, HfClass::kQwen2Moe);
  const ckpt::ModelShape& m = hf.shape;
  EXPECT_EQ(m.experts, 4);
  EXPECT_EQ(m.router_topk, 2);
  EXPECT_EQ(m.moe_ffn, 48);
  EXPECT_FALSE(m.router_norm_topk);  // norm_topk_prob's class default
  EXPECT_EQ(m.shared_experts, 1);
  EXPECT_EQ(m.shared_width(), 40);
  EXPECT_TRUE(m.shared_expert_gate);
  EXPECT_TRUE(m.qkv_bias);  // absent in transformers 4's configs: the class always had them
  EXPECT_FALSE(m.bias);
  EXPECT_EQ(hf_class(m), HfClass::kQwen2Moe);
  const ckpt::ModelShape back = parse_hf_config(hf_config_json(m, "float32"), "c").shape;
  EXPECT_EQ(back.shared_width(), 40);
  EXPECT_EQ(back.moe_ffn, 48);
  EXPECT_EQ(back.router_norm_topk, false);
  EXPECT_EQ(back.qkv_bias, true);
  EXPECT_THAT(refusal(base + R"(, "decoder_sparse_step": 2})"), HasSubstr("\"decoder_sparse_step\""));
  EXPECT_THAT(refusal(base + R"(, "mlp_only_layers": [1]})"), HasSubstr("\"mlp_only_layers\""));
  EXPECT_THAT(refusal(base + R"(, "num_experts_per_tok": 5})"), HasSubstr("\"num_experts_per_tok\""));
}

TEST(HfConfig, Qwen3MoeHasQkNormAndNoSharedExpert) {
  const HfModel hf = parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16, "moe_intermediate_size": 48, "num_hidden_layers": 2,
      "vocab_size": 300, "num_local_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": true})", "c");
  EXPECT_EQ(hf.cls, HfClass::kQwen3Moe);
  EXPECT_TRUE(hf.shape.qk_norm);
  EXPECT_EQ(hf.shape.experts, 4);
  EXPECT_EQ(hf.shape.shared_experts, 0);
  EXPECT_TRUE(hf.shape.router_norm_topk);
  EXPECT_EQ(hf_class(hf.shape), HfClass::kQwen3Moe);
  EXPECT_EQ(parse_hf_config(hf_config_json(hf.shape, "float32"), "c").shape.experts, 4);
  EXPECT_THAT(refusal(R"({"model_type": "qwen3_moe", "attention_bias": true})"), HasSubstr("\"attention_bias\""));
}

// Qwen3-30B-A3B's attention: 32 heads of 128 over a hidden size of 2048.
TEST(HfConfig, Qwen3MoeHeadsNeedNotSpanTheHiddenSize) {
  const HfModel hf = parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32,
      "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48})", "c");
  EXPECT_EQ(hf.shape.head_dim(), 128);
  EXPECT_FALSE(hf.shape.derived_head_dim());
  const std::string written = hf_config_json(hf.shape, "bfloat16");
  EXPECT_THAT(written, HasSubstr("\"head_dim\": 128"));
  EXPECT_EQ(parse_hf_config(written, "c").shape.head_dim(), 128);
  // transformers 5's Qwen3MoeConfig has no head_dim of its own: absent, a head is hidden / heads.
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32})", "c")
                .shape.head_dim(), 64);
}

// Qwen3ForCausalLM: Llama with QK-norm, no biases, heads of 128 unless head_dim says.
TEST(HfConfig, Qwen3DenseHasQkNormAndHeadsOf128ByDefault) {
  const HfModel hf = parse_hf_config(R"({"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16,
      "num_key_value_heads": 8, "intermediate_size": 3072, "num_hidden_layers": 28, "vocab_size": 151936,
      "tie_word_embeddings": true})", "c");
  EXPECT_EQ(hf.cls, HfClass::kQwen3);
  EXPECT_TRUE(hf.shape.qk_norm);
  EXPECT_FALSE(hf.shape.bias);
  EXPECT_EQ(hf.shape.head_dim(), 128);  // Qwen3-0.6B: 16 heads of 128 over 1024
  EXPECT_EQ(hf_class(hf.shape), HfClass::kQwen3);
  const ckpt::ModelShape back = parse_hf_config(hf_config_json(hf.shape, "float32"), "c").shape;
  EXPECT_EQ(back.head_dim(), 128);
  EXPECT_TRUE(back.qk_norm);
  EXPECT_EQ(parse_hf_config(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
      "head_dim": null})", "c").shape.head_dim(), 128);
  EXPECT_THAT(refusal(R"({"model_type": "qwen3", "attention_bias": true})"), HasSubstr("\"attention_bias\""));
  EXPECT_THAT(refusal(R"({"model_type": "qwen3", "use_sliding_window": true})"), HasSubstr("\"use_sliding_window\""));
}

TEST(HfConfig, LlamaHeadDimIsTakenAsGivenAndNullMeansHiddenOverHeads) {
  const auto head_dim = [](const std::string& extra) {
    return parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4)" + extra + "}", "c")
        .shape.head_dim();
  };
  EXPECT_EQ(head_dim(R"(, "head_dim": 32)"), 32);
  EXPECT_EQ(head_dim(R"(, "head_dim": null)"), 16);
  EXPECT_EQ(head_dim(""), 16);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 24})", "c").shape.head_dim(), 24);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
      "head_dim": 24})", "c").shape.head_dim(), 24);
}

// Shared experts other than Qwen2-MoE's one gated expert have no class.
TEST(HfConfig, SharedExpertsQwen2MoeCannotHoldAreRefusedNamingTheKeys) {
  ckpt::ModelShape m = testing::tiny_llama();
  m.experts = 4;
  m.moe_ffn = 16;
  m.shared_experts = 2;
  try {
    hf_class(m);
    FAIL() << "two ungated shared experts were accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.shared_experts = 2, shared_expert_gate = false"));
  }
  m.shared_experts = 0;
  m.qkv_bias = true;
  EXPECT_THROW(hf_class(m), Error);  // Mixtral has no QKV biases
}

TEST(HfConfig, GptHeadsOtherThanHiddenOverHeadsHaveNoClass) {
  ckpt::ModelShape m = testing::tiny_gpt2();
  m.head_size = m.hidden / m.heads + 2;
  try {
    hf_class(m);
    FAIL() << "GPT-2 with its own head size was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("set head_dim = 0"));
  }
}

TEST(HfConfig, WhatMegahostCannotComputeIsRefusedNamingTheField) {
  EXPECT_THAT(refusal(R"({"model_type": "gpt2", "activation_function": "gelu"})"),
              HasSubstr("\"activation_function\""));
  EXPECT_THAT(refusal(R"({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": true})"),
              HasSubstr("scale_attn_by_inverse_layer_idx"));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2}})"),
              HasSubstr("\"rope_scaling\""));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "attention_bias": true})"), HasSubstr("\"mlp_bias\""));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 15})"),
              HasSubstr("\"head_dim\": is 15, odd"));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 0})"),
              HasSubstr("\"head_dim\" must be a positive integer"));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 5})"),
              HasSubstr("\"hidden_size\": is not divisible by num_attention_heads = 5"));
  EXPECT_THAT(refusal(R"({"model_type": "bert"})"), HasSubstr("\"bert\""));
  EXPECT_THAT(refusal(R"({"model_type": "gpt2", "n_embd": -3})"), HasSubstr("/m/config.json: \"n_embd\""));
  EXPECT_THAT(refusal(R"({"model_type": "gpt2", "n_embd": 10, "n_head": 4})"), HasSubstr("not divisible"));
  EXPECT_THAT(refusal("[1, 2"), HasSubstr("not valid JSON"));
}

// megahost_convert accepted rope_theta 0, which megahost refuses, and
// num_hidden_layers = 2^40 ran out of memory (std::bad_alloc, status 1):
// both are held to megahost's own [model] ranges, before any weight.
TEST(HfConfig, ValuesOutsideMegahostsModelRangesAreRefusedAsMegahostRefusesThem) {
  EXPECT_THAT(refusal(R"({"model_type": "llama", "rope_theta": 0})"),
              HasSubstr("/m/config.json: \"rope_theta\" = 0.0 is outside what model.rope_theta takes (1 to 1e+12)"));
  EXPECT_THAT(refusal(R"({"model_type": "llama", "num_hidden_layers": 1099511627776})"),
              HasSubstr("\"num_hidden_layers\" = 1099511627776 is outside what model.layers takes (1 to 100000)"));
  EXPECT_THAT(refusal(R"({"model_type": "gpt2", "resid_pdrop": 1.0})"),
              HasSubstr("\"resid_pdrop\" = 1.0 is outside what model.dropout takes (0 to 0.99)"));
}

TEST(HfConfig, WrittenConfigReadsBackAsTheSameModel) {
  for (const ckpt::ModelShape& m : {testing::tiny_gpt2(), testing::tiny_llama()}) {
    const ckpt::ModelShape back = parse_hf_config(hf_config_json(m, "float32"), "c").shape;
    EXPECT_EQ(back.layers, m.layers);
    EXPECT_EQ(back.hidden, m.hidden);
    EXPECT_EQ(back.heads, m.heads);
    EXPECT_EQ(back.kv(), m.kv());
    EXPECT_EQ(back.ffn, m.ffn);
    EXPECT_EQ(back.seq_len, m.seq_len);
    EXPECT_EQ(back.vocab_size, m.vocab_size);
    EXPECT_EQ(back.vocab, m.vocab);
    EXPECT_EQ(back.normalization, m.normalization);
    EXPECT_EQ(back.tie_embeddings, m.tie_embeddings);
    EXPECT_EQ(back.bias, m.bias);
    EXPECT_DOUBLE_EQ(back.norm_eps, m.norm_eps);
  }
}

TEST(HfConfig, AModelNeitherClassExpressesNamesItsKeys) {
  ckpt::ModelShape m = testing::tiny_gpt2();
  m.position = "rope";
  try {
    hf_class(m);
    FAIL() << "layernorm + rope was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.normalization = \"layernorm\", position = \"rope\""));
  }
  m.position = "learned";
  m.bias = false;
  EXPECT_THROW(hf_class(m), Error);
}

TEST(HfConfig, ModelKeysSayWhichFieldFixesEach) {
  const HfModel hf = parse_hf_config(R"({"model_type": "gpt2", "n_embd": 768, "n_inner": null})", "c");
  bool hidden = false, ffn = false;
  for (const ModelKey& k : model_keys(hf)) {
    if (k.key == "hidden") hidden = k.field == "n_embd" && k.value == 768 && k.rule == ModelKey::kEqual;
    if (k.key == "ffn_hidden") ffn = k.value == 3072 && k.zero_means_this;
    if (k.key == "seq_len") {
      EXPECT_EQ(k.rule, ModelKey::kAtMost);
    }
    if (k.key == "dropout") {
      EXPECT_EQ(k.rule, ModelKey::kDefault);
    }
  }
  EXPECT_TRUE(hidden);
  EXPECT_TRUE(ffn);
}

}  // namespace
}  // namespace mh::convert
