// The attention part as generation runs it: the same QKV projection as
// training (AttentionPart::project), then, per sequence served, the
// rotation of its new rows to their positions, their keys and values
// appended to the KV cache, and causal attention of the new rows over every
// cached position. The sequences' rows are packed one after another (no
// padding), so prompts of different lengths and decode steps of different
// ages share one forward; only the attention core runs per sequence.
#pragma once

#include <span>

#include "engine/activations.hpp"
#include "engine/kv_cache.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class CachedAttention {
 public:
  explicit CachedAttention(const PartContext& c) : c_(c) {}

  // Fills A's QKV and context [rows, local_hidden] from A's first norm
  // output, for global layer `layer`.
  void forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, KvCache& cache,
               std::span<const SequenceRows> seqs) const;

 private:
  void rotate(TypedPtr qkv, const SequenceRows& s) const;
  void attend(LayerActivations& A, int64_t layer, const KvCache& cache, const SequenceRows& s) const;

  PartContext c_;
};

}  // namespace mh
