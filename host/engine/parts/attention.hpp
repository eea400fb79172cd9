// The attention part: the QKV projection, the position encoding (the
// position part; learned positions live in the embedding), and a core that
// turns Q, K and V into the context: over the whole sequence in training
// and evaluation (AttentionPart), over a KV cache in generation
// (CachedAttention, cached_attention.hpp). The output projection belongs to
// the layer's residual branch.
//
// QKV is laid out per key/value group, as Megatron-Core does: each row
// holds, for each of the rank's k/t groups, its m = a/k query heads, then
// its K, then its V (head_dim each). With k = a this is q, k, v per head.
#pragma once

#include <megahost/abi.h>

#include "engine/activations.hpp"
#include "engine/parts/lora.hpp"
#include "engine/parts/part_context.hpp"
#include "engine/parts/position.hpp"

namespace mh {

// What the layer skeleton asks of attention, whichever core it runs.
class AttentionCore {
 public:
  virtual ~AttentionCore() = default;
  // Fills whichever of QKV, the core's activations and the context
  // [rows, local_hidden] A lacks, from A's first norm output, for global
  // layer `layer`.
  virtual void forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass) const = 0;
  // dctx [rows, local_hidden]: the context's gradient, for the pass
  // forward ran. Accumulates the QKV weight's gradients and returns the
  // gradient of the (gathered) norm output, f32 [rows, h], in `dx`.
  virtual void backward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass,
                        TypedPtr dctx, Buffer& dx) const = 0;
};

// Causal attention over the whole sequence, with dropout on the
// probabilities; its activations are QKV, the scores, the dropout mask and
// probabilities, and the context.
class AttentionPart final : public AttentionCore {
 public:
  AttentionPart(const PartContext& c, const PositionPart& position) : c_(c), position_(position) {}

  void forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass) const override;
  void backward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass, TypedPtr dctx,
                Buffer& dx) const override;

  // A[QKV] = the QKV projection of A's first norm output (with its bias,
  // and QK-norm where the model has it), before any position encoding, its
  // adapter reading `drop`; the cached core starts here too.
  static void project(const PartContext& c, LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop);

  // Bytes activation `a` takes per micro-batch on one rank, for the parts'
  // activations (0 for others), with e-byte activations and 1-byte masks.
  static double activation_bytes(const ModelDims& d, double e, MH_Activation a);

 private:
  // out [rows, local_qkv] = in @ W^T (+ bias, + the adapter's): QKV before QK-norm.
  static void linear_qkv(const PartContext& c, TypedPtr in, const LayerParamIds& w, const LoraDropout& drop,
                         TypedPtr out);
  // QK-norm's backward: dqkv's query and key heads become the gradients
  // before the norm, its weights' gradients accumulate. Recomputes the
  // projection from `in` rather than keep it.
  void qk_norm_bwd(TypedPtr in, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dqkv) const;
  void core(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  void core_bwd(LayerActivations& A, const LayerPass& pass, TypedPtr dctx, TypedPtr dqkv) const;
  // Encodes each query head and the key of every group by their positions;
  // `inverse` undoes it (the backward).
  void encode(TypedPtr qkv, const LayerPass& pass, bool inverse) const;
  // The probabilities' dropout stream in layer `layer`: local probabilities
  // are [b, a/t, s, s] of the global [b, a, s, s].
  MH_RngSpan probs_span(uint64_t key, int64_t layer) const;

  PartContext c_;
  const PositionPart& position_;
};

}  // namespace mh
