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

#include <functional>
#include <memory>

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
  // [rows, local_attention] A lacks, from A's first norm output, for global
  // layer `layer`.
  virtual void forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass) const = 0;
  // dctx [rows, local_attention]: the context's gradient, for the pass
  // forward ran. Accumulates the QKV weight's gradients and returns the
  // gradient of the (gathered) norm output, f32 [rows, h], in `dx`.
  virtual void backward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass,
                        TypedPtr dctx, Buffer& dx) const = 0;
};

// Causal attention over the whole sequence, with dropout on the
// probabilities, unfused: its activations are QKV, the scores, the dropout
// mask and probabilities, and the context. The flash core below shares its
// projection and position encoding and replaces the core.
class AttentionPart : public AttentionCore {
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
  // activations (0 for others), with e-byte activations and 1-byte masks,
  // for the core d.spec.attention_backend names.
  static double activation_bytes(const ModelDims& d, double e, Activation a);

  // Context parallelism by all-to-all (Ulysses, d.cp_comm = kA2a): the
  // core `make` builds over whole sequences of 1/cp of the rank's heads
  // (the dims head_sharded gives) computes this part's core between the
  // exchanges; the same class as this one, so flash stays flash.
  void shard_heads(const std::function<std::unique_ptr<AttentionPart>(const PartContext&)>& make);

 protected:
  // Fills the core's activations and the context from QKV.
  virtual void core(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  // dqkv (written) from the context's gradient dctx.
  virtual void core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                        TypedPtr dqkv) const;
  // The probabilities' dropout stream in layer `layer`: local probabilities
  // are [b, a/t, s, s] of the global [b, a, s, s] (without context
  // parallelism).
  MH_RngSpan probs_span(uint64_t key, int64_t layer) const;
  // Context parallelism (cp > 1), all_gather: every rank's K and V, [s, b *
  // groups, 2D] in global position order.
  Buffer gather_kv(TypedPtr qkv) const;
  // dkv [s, b * groups, 2D], this rank's contribution to every position's:
  // summed over the group, the rank's own positions into dqkv's K and V.
  void scatter_dkv(TypedPtr dkv, TypedPtr dqkv) const;

  // Whether core_bwd reads the context (the flash op's backward does).
  virtual bool backward_reads_context() const { return false; }

  PartContext c_;

 private:
  // The head-sharded core of shard_heads and the dims its context refers to.
  struct HeadShards {
    explicit HeadShards(const PartContext& outer);
    ModelDims d;
    PartContext c;
    std::unique_ptr<AttentionPart> core;
  };

  // Ulysses: Q, K and V exchanged for whole sequences of 1/cp of the heads,
  // the head-sharded core run on them, the context exchanged back; the
  // core's own activations stay in the head-sharded layout. Backward
  // exchanges the context's gradient (and QKV and the context again, as
  // the all-gather core gathers again) and returns dqkv by the inverse.
  void ulysses_core(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  void ulysses_core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                        TypedPtr dqkv) const;
  // The core over a context-parallel group with all-gathered keys and
  // values; backward reduce-scatters their gradients to their owners.
  void context_core(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  void context_core_bwd(LayerActivations& A, TypedPtr dctx, TypedPtr dqkv) const;
  // Encodes each query head and the key of every group by their positions;
  // `inverse` undoes it (the backward).
  void encode(TypedPtr qkv, const LayerPass& pass, bool inverse) const;
  // out [rows, local_qkv] = in @ W^T (+ bias, + the adapter's): QKV before QK-norm.
  static void linear_qkv(const PartContext& c, TypedPtr in, const LayerParamIds& w, const LoraDropout& drop,
                         TypedPtr out);
  // QK-norm's backward: dqkv's query and key heads become the gradients
  // before the norm, its weights' gradients accumulate. Recomputes the
  // projection from `in` rather than keep it.
  void qk_norm_bwd(TypedPtr in, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dqkv) const;

  const PositionPart& position_;
  std::unique_ptr<HeadShards> heads_;
};

// Ulysses' view of the model: every position of the sequence and 1/cp of
// the rank's key/value groups, as tensor rank tp_rank cp + cp_rank of t cp
// without a context group (the heads' global indices, so dropout draws
// one rank's masks).
ModelDims head_sharded(const ModelDims& d);

// The same attention with the kernels' memory-efficient op (abi.h
// MH_AttentionArgs, FlashAttention): Q, K and V read in place from QKV, no
// [s, s] buffer. Its activations are QKV and the context, the context's
// buffer followed by the f32 log-sum-exp of every query row, [b, a/t, s],
// which the backward reads to recompute the probabilities: keeping,
// dropping or recomputing the context does the same to it. The dropout
// draws the unfused core's mask, so both compute the same function.
class FlashAttentionPart final : public AttentionPart {
 public:
  using AttentionPart::AttentionPart;

  // The context's elements before its log-sum-exp (padded to 4 bytes).
  static int64_t lse_offset(const ModelDims& d, int32_t dtype);

 private:
  void core(LayerActivations& A, const LayerPass& pass, int64_t layer) const override;
  void core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                TypedPtr dqkv) const override;
  bool backward_reads_context() const override { return true; }
  // The op's arguments over A's QKV and context.
  MH_AttentionArgs args(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  // With context parallelism: those of the rank's chunk k against the
  // gathered keys and values `kv`; its backward, chunk by chunk.
  MH_AttentionArgs chunk_args(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr kv,
                              int64_t k) const;
  void chunks_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx, TypedPtr dqkv) const;
  // Ring attention (comm_type p2p): the rank's keys and values passed
  // around the context group; at each step every local query chunk
  // attends to the visiting block's chunks that are not wholly after it,
  // merged into its context and log-sum-exp (the op's accumulate).
  // Backward passes the blocks again, each with its K/V gradients, which
  // return to their owner after cp steps.
  void ring(LayerActivations& A, const LayerPass& pass, int64_t layer) const;
  void ring_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx, TypedPtr dqkv) const;
  // Passes the rank's K/V block around the context group, calling
  // `at_step(step, block)` with the block held at each step.
  template <class AtStep>
  void ring_walk(LayerActivations& A, AtStep&& at_step) const;
  // Calls `visit(k, owner, j)` for each local query chunk k and chunk j of
  // the block held at `step` (context rank owner's) that k attends to.
  template <class Visit>
  void ring_step(int32_t step, Visit&& visit) const;
  // Passes `n` elements of `block` to the next rank of the ring, receiving
  // the previous rank's into `next`.
  void ring_shift(TypedPtr block, TypedPtr next, int64_t n) const;
  // Chunk k's arguments against chunk j of context rank `owner`'s block.
  MH_AttentionArgs ring_args(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr block, int64_t k,
                             int32_t owner, int64_t j) const;
};

}  // namespace mh
