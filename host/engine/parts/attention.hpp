// The attention part: the QKV projection, the position encoding (RoPE
// rotates Q and K in place; learned positions live in the embedding), and
// the causal attention core over grouped key/value heads. Its activations
// are QKV, the scores, the dropout mask and probabilities, and the context;
// the output projection belongs to the layer's residual branch.
//
// QKV is laid out per key/value group, as Megatron-Core does: each row
// holds, for each of the rank's k/t groups, its m = a/k query heads, then
// its K, then its V (head_dim each). With k = a this is q, k, v per head.
#pragma once

#include <megahost/abi.h>

#include "engine/activations.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class AttentionPart {
 public:
  explicit AttentionPart(const PartContext& c) : c_(c) {}

  // Fills whichever of QKV, scores, mask, probabilities and context A lacks,
  // from A's first norm output. `probs_rng`: the dropout stream of the
  // probabilities.
  void forward(LayerActivations& A, const LayerParamIds& w, float attn_p, const MH_RngSpan& probs_rng) const;
  // dctx [rows, local_hidden]: the context's gradient. Accumulates the QKV
  // weight's gradients and returns the gradient of the (gathered) norm
  // output, f32 [rows, h], in `dx`.
  void backward(LayerActivations& A, const LayerParamIds& w, TypedPtr dctx, Buffer& dx) const;

  // A[QKV] = the QKV projection of A's first norm output (with its bias),
  // before any position encoding; generation's cached attention starts here.
  void project(LayerActivations& A, const LayerParamIds& w) const;

  // Bytes activation `a` takes per micro-batch on one rank, for the parts'
  // activations (0 for others), with e-byte activations and 1-byte masks.
  static double activation_bytes(const ModelDims& d, double e, MH_Activation a);

 private:
  void core(LayerActivations& A, float attn_p, const MH_RngSpan& probs_rng) const;
  void core_bwd(LayerActivations& A, TypedPtr dctx, TypedPtr dqkv) const;
  // Rotates each query head and the key of every group by their positions;
  // `inverse` undoes it (the backward of the rotation).
  void rotate(TypedPtr qkv, bool inverse) const;

  PartContext c_;
};

}  // namespace mh
