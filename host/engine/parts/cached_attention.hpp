// The attention core as generation runs it: the same QKV projection as
// training (AttentionPart::project), then, per sequence served, the
// position encoding of its new rows, their keys and values appended to the
// KV cache, and causal attention of the new rows over every cached
// position. The sequences' rows are packed one after another (no padding),
// so prompts of different lengths and decode steps of different ages share
// one forward; only the core runs per sequence.
#pragma once

#include <span>

#include "engine/kv_cache.hpp"
#include "engine/parts/attention.hpp"

namespace mh {

class CachedAttention final : public AttentionCore {
 public:
  CachedAttention(const PartContext& c, const PositionPart& position, KvCache& cache,
                  std::span<const SequenceRows> seqs)
      : c_(c), position_(position), cache_(cache), seqs_(seqs) {}

  void forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass) const override;
  // Inference only: there is no backward through a cache.
  void backward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass, TypedPtr dctx,
                Buffer& dx) const override;

 private:
  void encode(TypedPtr qkv, const SequenceRows& s) const;
  void attend(LayerActivations& A, int64_t layer, const SequenceRows& s) const;

  PartContext c_;
  const PositionPart& position_;
  KvCache& cache_;
  std::span<const SequenceRows> seqs_;
};

}  // namespace mh
