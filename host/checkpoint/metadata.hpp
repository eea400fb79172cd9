// A checkpoint's metadata.json: what was saved (step, data position, seed,
// model, layout, schedule, tokenizer, dtype) and the index of every global
// tensor: its shape and the rectangles of it that each rank's file holds.
// docs/checkpoint.md is the specification; this is its reader and writer.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mh::ckpt {

constexpr const char* kFormatName = "megahost-checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kMetadataFile = "metadata.json";

// A rectangle of a 2-D global tensor: rows [row, row + rows), columns
// [col, col + cols). Vectors are one row.
struct Rect {
  int64_t row = 0, col = 0, rows = 0, cols = 0;
  int64_t numel() const { return rows * cols; }
  bool operator==(const Rect&) const = default;
};

struct SliceRef {
  std::string file, key;  // the safetensors file and its tensor key
  Rect rect;
};

struct TensorEntry {
  std::array<int64_t, 2> shape{};
  std::string dtype = "F32";
  std::vector<SliceRef> slices;
};

struct FileEntry {
  uint64_t bytes = 0;
  std::string xxh3;  // 16 hex digits of the whole file's XXH3-64
};

// Megatron pads the vocabulary so the output layer splits evenly and runs
// on aligned shapes; a fixed multiple keeps the model identical on every
// tensor-parallel size that divides it.
constexpr int64_t kVocabMultiple = 128;
inline int64_t padded_vocab(int64_t vocab) { return (vocab + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple; }

// The model a checkpoint holds: its dimensions and variant ([model]'s keys).
// A checkpoint written before the variant keys reads as GPT-2 (the defaults).
struct ModelShape {
  int64_t layers = 0, hidden = 0, heads = 0, ffn = 0, seq_len = 0, vocab = 0;  // vocab as padded
  int64_t vocab_size = 0;  // unpadded; 0 where the checkpoint predates it
  // The positions the model was made for (Hugging Face's
  // max_position_embeddings); 0 means seq_len. A learned table has seq_len
  // rows; rotary positions can serve more than a fine-tune's seq_len.
  int64_t max_positions = 0;
  std::string arch = "gpt2", normalization = "layernorm", position = "learned";
  double rope_theta = 10000;
  std::string activation = "gelu";
  int64_t kv_heads = 0;  // 0 means heads
  int64_t head_size = 0;  // [model] head_dim; 0 means hidden / heads
  bool tie_embeddings = true, bias = true;
  double norm_eps = 1e-5;
  // Mixture of experts ([model] experts, ...); experts = 0 is a dense MLP.
  int64_t experts = 0, router_topk = 2, moe_ffn = 0;
  bool router_norm_topk = true;
  double router_aux_loss_coef = 0;
  // Shared experts beside the routed ones (Qwen2-MoE, DeepSeek): how many,
  // each one's inner size (0 means moe_ffn) and Qwen2-MoE's sigmoid gate.
  int64_t shared_experts = 0, shared_ffn = 0;
  bool shared_expert_gate = false;
  bool qkv_bias = false;  // biases on QKV alone (Qwen2) where bias is false
  bool qk_norm = false;   // RMSNorm over each query and key head (Qwen3)

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t head_dim() const { return head_size > 0 ? head_size : hidden / heads; }
  // Whether the head size is hidden / heads (no head_dim key needed).
  bool derived_head_dim() const { return hidden % heads == 0 && head_dim() == hidden / heads; }
  int64_t positions() const { return max_positions > 0 ? max_positions : seq_len; }
  int64_t shared_width() const { return shared_experts * (shared_ffn > 0 ? shared_ffn : moe_ffn); }
};

struct Layout {
  int64_t tensor = 1, pipeline = 1, data = 1, virtual_stages = 1, world = 1;
  bool sequence_parallel = false, distributed_optimizer = false;
};

struct Metadata {
  int64_t version = kFormatVersion;
  int64_t step = 0;
  int64_t consumed_samples = 0;  // the data order's position: global samples trained on
  int64_t global_batch = 0, micro_batch = 0;
  uint64_t seed = 0;             // keys init, dropout and the data order
  ModelShape model;
  Layout layout;
  nlohmann::json schedule;       // the learning-rate schedule's settings
  // {"name", "vocab_padded"}, and where known the tokenizer's files
  // ("vocab_file", "merges_file", "tokenizer_file": absolute paths) and
  // special ids ("bos_token_id", "eos_token_id").
  nlohmann::json tokenizer;
  std::string dtype;             // the kernels' compute dtype; tensors are f32 masters
  bool optimizer = true;         // AdamW's moments saved
  // A LoRA checkpoint's adapters: {"method", "rank", "alpha", "targets",
  // "base": the absolute path of the checkpoint they adapt}; null for a
  // checkpoint of the whole model.
  nlohmann::json peft;
  std::map<std::string, FileEntry> files;
  std::map<std::string, TensorEntry> tensors;
};

nlohmann::json to_json(const Metadata& m);
// Parses and checks metadata.json's text (`path` names it in errors): the
// format and version, every field's type, and that each tensor's slices lie
// in files the index lists, inside its shape, and cover it exactly.
Metadata parse_metadata(std::string_view text, const std::string& path);
// Reads DIR/metadata.json.
Metadata read_metadata(const std::string& dir);

// "model.hidden: checkpoint 256, this run 128" for each dimension or
// variant key that differs (the ones that decide which tensors exist and
// their shapes); empty when the model matches.
std::vector<std::string> shape_differences(const ModelShape& saved, const ModelShape& run);

}  // namespace mh::ckpt
