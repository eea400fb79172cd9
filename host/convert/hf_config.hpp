// A Hugging Face config.json (GPT2Config, LlamaConfig, Qwen2Config,
// Qwen3Config, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig) and the model it
// describes, as Megahost's [model] keys: reading one to import a model or
// to fill [model] for a run that loads it, writing one on export.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata.hpp"
#include "checkpoint/model_keys.hpp"

namespace mh::convert {

// The transformers classes Megahost's models map to.
enum class HfClass { kGpt2, kLlama, kQwen2, kQwen3, kMixtral, kQwen2Moe, kQwen3Moe };
// "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MixtralForCausalLM",
// "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"
const char* class_name(HfClass c);

struct HfModel {
  HfClass cls = HfClass::kGpt2;
  // vocab padded, vocab_size as the file's; seq_len the positions it was made for.
  ckpt::ModelShape shape;
  double dropout = 0, attention_dropout = 0;  // training settings, not the model's shape
  nlohmann::json bos_token_id, eos_token_id;   // null where config.json has none
};

// Parses config.json's text (`path` names it in errors), with the class's
// defaults for absent fields as transformers applies them. Throws naming the
// field and the fix for anything Megahost cannot compute the same way.
HfModel parse_hf_config(std::string_view text, const std::string& path);
// Reads DIR/config.json.
HfModel read_hf_config(const std::string& dir);

// The class that computes `m`; throws naming the [model] keys that neither
// class can express.
HfClass hf_class(const ckpt::ModelShape& m);
// config.json for `m` (its vocab_size unpadded), tensors stored as
// `torch_dtype` ("float32", "bfloat16"), with the tokenizer's special ids
// (`special`: "bos_token_id", "eos_token_id"; absent ones left out).
std::string hf_config_json(const ckpt::ModelShape& m, const std::string& torch_dtype,
                           const nlohmann::json& special = nlohmann::json::object());

// The [model] keys a config.json fixes, for a run that loads the folder.
using ckpt::ModelKey;
std::vector<ModelKey> model_keys(const HfModel& hf);

// The [data] tokenizer keys of a folder whose tokenizer is SentencePiece's,
// taken where the user set none: a tokenizer.json of that layout (BPE with
// byte_fallback) as tokenizer = "huggingface", else a tokenizer.model as
// tokenizer = "sentencepiece". None for other folders, whose byte-level
// tokenizer.json the user names, as before.
std::vector<ModelKey> sentencepiece_tokenizer_keys(const std::string& dir);

}  // namespace mh::convert
