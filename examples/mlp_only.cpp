// A recompute policy from outside megahost: keep each layer's input and the
// MLP block's activations, recompute the attention block in backward. The
// attention block holds the tensors that grow with s^2 (scores, mask,
// probabilities); recomputing it frees them for about a third of a layer's
// GEMM FLOPs when s is small next to h.
#include <megahost/plugin.hpp>

namespace {

class MlpOnly {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  explicit MlpOnly(const mh::CreateContext&) {}
  MH_Decision decide(const MH_RecomputeQuery& query) const {
    const bool mlp = query.activation >= MH_ACT_LN2;
    return mlp || query.activation == MH_ACT_LAYER_INPUT ? MH_KEEP : MH_RECOMPUTE;
  }
};

}  // namespace

MH_PLUGIN("mlp_only", "1.0.0",
          mh::component<MlpOnly>("mlp_only", "1.0.0", "keep layer inputs and MLP activations, recompute attention"))
