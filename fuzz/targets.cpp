#include "targets.hpp"

namespace mh::fuzz {

Target find_target(std::string_view name) {
  if (name == "config") return &config;
  if (name == "overrides") return &overrides;
  if (name == "gpt2_tokenizer") return &gpt2_tokenizer;
  if (name == "tokenizer_json") return &tokenizer_json;
  if (name == "sentencepiece_model") return &sentencepiece_model;
  if (name == "indexed_dataset") return &indexed_dataset;
  if (name == "plugin_descriptor") return &plugin_descriptor;
  if (name == "checkpoint_metadata") return &checkpoint_metadata;
  if (name == "slice_cover") return &slice_cover;
  if (name == "safetensors_header") return &safetensors_header;
  if (name == "checkpoint_rank_file") return &checkpoint_rank_file;
  if (name == "hf_config") return &hf_config;
  if (name == "shard_index") return &shard_index;
  if (name == "token_range_sidecar") return &token_range_sidecar;
  if (name == "checkpoint_owner") return &checkpoint_owner;
  if (name == "prompts_jsonl") return &prompts_jsonl;
  if (name == "chat_template") return &chat_template;
  if (name == "sft_jsonl") return &sft_jsonl;
  if (name == "openai_request") return &openai_request;
  return nullptr;
}

}  // namespace mh::fuzz
