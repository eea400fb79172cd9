// Keep tables of the built-in recompute policies (plugins/recompute/policies)
// as the host reports them for a candidate, for the tests that drive the
// cost model without a host: none keeps every activation, selective drops
// the attention core (scores, mask, probabilities), full (uniform, `group`
// layers per group) keeps only the first layer input of each group of its
// chunk; a chunk's first layer input is always kept.
#pragma once

#include <megahost/abi.h>

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string_view>
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
      k[kActAttnScores] = k[kActAttnMask] = k[kActAttnProbs] = false;
    } else if (policy == "full") {
      k.fill(false);
      k[kActLayerInput] = position % group == 0;
    } else if (policy != "none") {
      throw std::invalid_argument("no built-in recompute policy '" + policy + "'");
    }
    if (position == 0 && l > 0) k[kActLayerInput] = true;
  }
  return keep;
}

// MH_Estimate.keep for candidate `c` of `model`, with the columns `columns`
// (MH_Estimate.activations, in any order; a name the cost model does not
// know is kept, as the built-in policies keep it).
inline std::vector<int32_t> candidate_keep(const Model& model, const MH_Candidate& c,
                                           std::span<const char* const> columns = kActivationNames) {
  const KeepTable keep = builtin_keep(c.recompute, model.layers, model.layers / (int64_t(c.pipeline) * c.virtual_stages),
                                      c.recompute_layers > 0 ? c.recompute_layers : 1);
  std::vector<int32_t> out;
  for (const LayerKeep& layer : keep)
    for (const char* name : columns) {
      const auto* a = std::find_if(kActivationNames.begin(), kActivationNames.end(),
                                   [&](const char* known) { return std::string_view(known) == name; });
      const bool kept = a == kActivationNames.end() || layer[size_t(a - kActivationNames.begin())];
      out.push_back(kept ? MH_KEEP : MH_RECOMPUTE);
    }
  return out;
}

// What the host hands the tuner before begin.
inline const std::vector<const char*>& builtin_policies() {
  static const std::vector<const char*> names{"full", "none", "selective"};
  return names;
}

}  // namespace mh::tuner::testing
