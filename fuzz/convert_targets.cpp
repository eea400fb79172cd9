// Hugging Face interop fuzzing: the two JSON files a model folder from
// outside brings, config.json and model.safetensors.index.json, read before
// any tensor.
#include <megahost/error.hpp>

#include <string_view>

#include "convert/hf_config.hpp"
#include "convert/hf_folder.hpp"
#include "targets.hpp"

namespace mh::fuzz {

void hf_config(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    const convert::HfModel hf = convert::parse_hf_config(text, "config.json");
    convert::model_keys(hf);
    // What it accepts, it writes, and reads back as the same class.
    const convert::HfModel back = convert::parse_hf_config(convert::hf_config_json(hf.shape, "float32"), "config.json");
    if (back.cls != hf.cls || back.shape.ffn != hf.shape.ffn || back.shape.kv() != hf.shape.kv()) __builtin_trap();
  } catch (const Error&) {
  }
}

void shard_index(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    for (const auto& [name, file] : convert::parse_shard_index(text, "model.safetensors.index.json"))
      if (file.empty() || file.find('/') != std::string::npos) __builtin_trap();
  } catch (const Error&) {
  }
}

}  // namespace mh::fuzz
