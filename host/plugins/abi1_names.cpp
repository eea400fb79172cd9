// 2.0 names the weights of the tensor plan and the activations of the keep
// table at run time (abi.h rule 7); 1.x indexed fixed arrays by its
// MH_Weight and MH_Activation enums. The names of 2.0 in the order of 1.x's
// enums, so a name's position is its 1.x index.
#include <array>
#include <cstring>

#include "plugins/abi1_component.hpp"

namespace mh::abi1 {
namespace {

// 1.x's MH_W_FC1 held a gated MLP's gate beside FC1: both names map to it.
struct WeightName {
  const char* name;
  int32_t index;
};
constexpr std::array<WeightName, 6> kWeightNames{
    {{"embedding", 0}, {"attention.qkv", 1}, {"attention.proj", 2}, {"mlp.gate", 3}, {"mlp.fc1", 3}, {"mlp.fc2", 4}}};

constexpr std::array<const char*, kActivations> kActivationNames{
    "layer_input",   "norm1",     "qkv",   "attn_scores", "attn_mask", "attn_probs",  "attn_context",
    "attn_out_mask", "residual1", "norm2", "fc1",         "mlp_act",   "mlp_out_mask"};

}  // namespace

int32_t weight_index(const char* name) {
  for (const WeightName& w : kWeightNames)
    if (name != nullptr && std::strcmp(w.name, name) == 0) return w.index;
  return -1;
}

int32_t activation_index(const char* name) {
  for (size_t i = 0; i < kActivationNames.size(); ++i)
    if (name != nullptr && std::strcmp(kActivationNames[i], name) == 0) return int32_t(i);
  return -1;
}

std::string known_weights() {
  std::string out;
  for (const WeightName& w : kWeightNames) out += (out.empty() ? "" : ", ") + std::string(w.name);
  return out;
}

}  // namespace mh::abi1
