// A Hugging Face model folder: config.json beside model.safetensors, or
// beside shards listed by model.safetensors.index.json. Reading opens every
// shard (mapped, not read) and serves tensors by name in f32 from F32 or
// BF16; writing splits the tensors into shards of at most a given size, in
// a temporary folder renamed into place.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "convert/tensor_map.hpp"

namespace mh::convert {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Whether `dir` is a Hugging Face folder (config.json, no metadata.json).
bool is_hf_folder(const std::string& dir);

// model.safetensors.index.json's weight_map: tensor name -> shard file.
// Throws naming `path` for anything but plain shard names in the folder.
std::map<std::string, std::string> parse_shard_index(std::string_view text, const std::string& path);

class HfFolder {
 public:
  explicit HfFolder(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // Tensor names without the "transformer." or "model." prefix
  // (GPT2LMHeadModel, LlamaForCausalLM) that the bare models' files lack;
  // buffers (GPT-2's attn.bias, attn.masked_bias; rotary_emb.inv_freq) left out.
  std::vector<std::string> names() const;
  // The tensor in f32; throws naming the folder and the tensor when it is
  // absent or of another dtype than F32 and BF16.
  HfTensor get(const std::string& name) const;

 private:
  struct Where {
    const safetensors::File* file;
    std::string key;
  };
  void add_file(const std::string& name);

  std::string dir_;
  std::vector<std::unique_ptr<safetensors::File>> files_;
  std::map<std::string, Where> tensors_;
};

struct HfEntry {
  std::string name;
  std::vector<int64_t> shape;
};

struct ShardOptions {
  std::string dtype = "F32";        // "F32" or "BF16"
  uint64_t max_shard_bytes = 5'000'000'000;
};

// Writes the folder `out` (which must not exist): config.json and `files`
// (the tokenizer's, generation_config.json), then the
// entries (data(i) gives entry i in f32) in model.safetensors, or in
// model-0000k-of-0000n.safetensors shards with the index when they exceed
// max_shard_bytes. Built in a temporary sibling folder and renamed.
void write_hf_folder(const std::string& out, const std::string& config_json,
                     const std::vector<std::pair<std::string, std::string>>& files, const std::vector<HfEntry>& entries,
                     const ShardOptions& options, const std::function<const std::vector<float>&(size_t)>& data);

// A new folder built under a temporary sibling name of its own
// (".tmp_NAME_XXXXXX", mkdtemp) and renamed to its path when whole. Until
// then the temporary folder is removed when this is destroyed: a failure or
// a stop signal part-way leaves nothing behind.
class StagedFolder {
 public:
  // `out` must not exist; `what` names the folder in errors.
  StagedFolder(const std::string& out, const std::string& what);
  ~StagedFolder();
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  const std::string& path() const { return temp_; }
  // Syncs the folder and renames it to `out`.
  void commit();

 private:
  std::string out_, temp_;
  bool committed_ = false;
};

}  // namespace mh::convert
