// The output layer's forward, written once for training, evaluation and
// generation: the final norm, then the vocabulary-parallel projection to
// f32 logits (each rank its vocabulary shard). Training adds the loss
// (transformer.cpp), generation gathers the shards and samples.
#pragma once

#include "engine/parts/norm.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class OutputHead {
 public:
  OutputHead(const PartContext& c, const NormPart& norm) : c_(c), norm_(norm) {}

  // The final norm of x [local_rows, h], kept for backward.
  Buffer norm(TypedPtr x) const { return norm_.forward(x, c_.params.lnf_w(), c_.params.lnf_b()); }
  // f32 logits [rows, local_vocab] of the (gathered) normed rows. Logits are
  // f32 in every precision: the softmax over a large vocabulary sums many
  // small exponentials, and the loss is a difference of logits.
  Buffer logits(const Buffer& normed, const LayerPass& pass) const;

 private:
  PartContext c_;
  const NormPart& norm_;
};

}  // namespace mh
