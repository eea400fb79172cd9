// Export: a Megahost checkpoint (any saving layout) as a Hugging Face folder
// that transformers' from_pretrained loads: config.json, and each global
// tensor assembled from its slices and mapped to the class's tensors, the
// vocabulary's padding trimmed, the tied output layer left out.
#pragma once

#include <string>

#include "checkpoint/metadata.hpp"
#include "checkpoint/tensor_reader.hpp"
#include "convert/hf_folder.hpp"
#include "convert/tensor_map.hpp"

namespace mh::convert {

// The whole global tensor `name` of checkpoint `dir`, which must have `shape`.
Matrix read_global(ckpt::TensorReader& reader, const ckpt::Metadata& meta, const std::string& dir,
                   const std::string& name, const std::array<int64_t, 2>& shape);

// The base checkpoint a LoRA checkpoint `dir` names; refused when it adapts
// the seed's initial model (no checkpoint holds it).
std::string lora_base(const std::string& dir, const ckpt::Metadata& meta);

// `in` is a checkpoint folder or a folder of them (the newest); `out` must
// not exist. A LoRA checkpoint exports its base with the adapters merged.
// Returns a line for the user about anything assumed.
std::string export_hf(const std::string& in, const std::string& out, const ShardOptions& options);

}  // namespace mh::convert
