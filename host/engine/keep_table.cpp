#include "engine/keep_table.hpp"

#include <megahost/error.hpp>

namespace mh {

KeepTable keep_table(const Instance& policy, const ChunkSpec& chunk, AttentionBackend backend) {
  const auto* api = policy.api<MH_RecomputeApi>();
  KeepTable keep(size_t(chunk.layers));
  for (int64_t l = 0; l < chunk.layers; ++l) {
    for (int a = 0; a < kActCount; ++a) {
      MH_RecomputeQuery q{sizeof(MH_RecomputeQuery), int32_t(chunk.first_layer + l), int32_t(chunk.first_layer),
                          int32_t(chunk.layers), kActivationNames[size_t(a)], 0};
      int32_t decision = MH_KEEP;
      check(api->decide(policy.get(), &q, &decision), policy.label() + " decide");
      keep[size_t(l)][size_t(a)] = decision == MH_KEEP;
    }
  }
  if (!chunk.first && !keep.empty()) keep[0][kActLayerInput] = true;
  if (backend == AttentionBackend::kFlash)
    for (auto& layer : keep)
      for (Activation a : {kActAttnScores, kActAttnMask, kActAttnProbs}) layer[a] = true;
  return keep;
}

}  // namespace mh
