// Export: a Megahost checkpoint (any saving layout) as a Hugging Face folder
// that transformers' from_pretrained loads: config.json, and each global
// tensor assembled from its slices and mapped to the class's tensors, the
// vocabulary's padding trimmed, the tied output layer left out.
#pragma once

#include <string>

#include "convert/hf_folder.hpp"

namespace mh::convert {

// `in` is a checkpoint folder or a folder of them (the newest); `out` must
// not exist. Returns a line for the user about anything assumed.
std::string export_hf(const std::string& in, const std::string& out, const ShardOptions& options);

}  // namespace mh::convert
