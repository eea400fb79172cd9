// A recompute policy from outside megahost: keep each layer's input and the
// MLP block's activations, recompute the attention block in backward. The
// attention block holds the tensors that grow with s^2 (scores, mask,
// probabilities); recomputing it frees them for about a third of a layer's
// GEMM FLOPs when s is small next to h.
#include <megahost/plugin.hpp>

#include <algorithm>
#include <string_view>

namespace {

// The attention block's activations (abi.h names them), up to the residual
// stream after it. Any other name is kept: the layer input, the MLP's, and
// one a newer host adds, which keeping is always correct for.
constexpr std::string_view kAttentionBlock[] = {"norm1",      "qkv",          "attn_scores",   "attn_mask",
                                                "attn_probs", "attn_context", "attn_out_mask", "residual1"};

class MlpOnly {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  explicit MlpOnly(const mh::CreateContext&) {}
  MH_Decision decide(const MH_RecomputeQuery& query) const {
    const bool attention = std::ranges::find(kAttentionBlock, query.activation) != std::ranges::end(kAttentionBlock);
    return attention ? MH_RECOMPUTE : MH_KEEP;
  }
};

}  // namespace

MH_PLUGIN("mlp_only", "1.0.0",
          mh::component<MlpOnly>("mlp_only", "1.0.0", "keep layer inputs and MLP activations, recompute attention"))
