#include "config/model_preset.hpp"

#include <string_view>

namespace mh {
namespace {

// GPT-2's values are the schema's defaults; Llama's differ in these.
void fill_llama(toml::table& model) {
  model.insert("normalization", "rmsnorm");
  model.insert("position", "rope");
  model.insert("activation", "swiglu");
  model.insert("tie_embeddings", false);
  model.insert("bias", false);
  model.insert("dropout", 0.0);
  model.insert("attention_dropout", 0.0);
}

}  // namespace

void apply_arch_preset(toml::table& root) {
  toml::table* model = root["model"].as_table();
  if (model == nullptr) return;
  const std::string_view arch = (*model)["arch"].value_or(std::string_view{});
  if (arch == "llama") fill_llama(*model);
}

}  // namespace mh
