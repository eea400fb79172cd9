// Keep tables of the built-in recompute policies (plugins/recompute/policies)
// as the host reports them for a candidate, for the tests that drive the
// cost model without a host: none keeps every activation, selective drops
// the attention core (scores, mask, probabilities), full (uniform, `group`
// layers per group) keeps only the first layer input of each group of its
// chunk; a chunk's first layer input is always kept.
#pragma once

#include <megahost/abi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "layout.hpp"

namespace mh::tuner::testing {

inline KeepTable builtin_keep(const std::string& policy, int64_t layers, int64_t chunk_layers, int32_t group) {
  KeepTable keep(static_cast<size_t>(layers));
  for (int64_t l = 0; l < layers; ++l) {
    LayerKeep& k = keep[size_t(l)];
    k.fill(true);
    const int64_t position = l % chunk_layers;
    if (policy == "selective") {
      k[MH_ACT_ATTN_SCORES] = k[MH_ACT_ATTN_MASK] = k[MH_ACT_ATTN_PROBS] = false;
    } else if (policy == "full") {
      k.fill(false);
      k[MH_ACT_LAYER_INPUT] = position % group == 0;
    } else if (policy != "none") {
      throw std::invalid_argument("no built-in recompute policy '" + policy + "'");
    }
    if (position == 0 && l > 0) k[MH_ACT_LAYER_INPUT] = true;
  }
  return keep;
}

// MH_Estimate.keep for candidate `c` of `model`.
inline std::vector<int32_t> candidate_keep(const Model& model, const MH_Candidate& c) {
  const KeepTable keep = builtin_keep(c.recompute, model.layers, model.layers / (int64_t(c.pipeline) * c.virtual_stages),
                                      c.recompute_layers > 0 ? c.recompute_layers : 1);
  std::vector<int32_t> out;
  for (const LayerKeep& layer : keep)
    for (bool kept : layer) out.push_back(kept ? MH_KEEP : MH_RECOMPUTE);
  return out;
}

// What the host hands the tuner before begin.
inline const std::vector<const char*>& builtin_policies() {
  static const std::vector<const char*> names{"full", "none", "selective"};
  return names;
}

}  // namespace mh::tuner::testing
