// What every part of a layer works with: the device, the rank's parameters,
// the tensor-parallel boundaries and the model's dimensions; and what one
// pass through the layers varies by.
#pragma once

#include <megahost/rng.hpp>

#include <cstdint>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/tensor_parallel.hpp"

namespace mh {

struct PartContext {
  Device& dev;
  ParamSet& params;
  TensorParallel& tp;
  const ModelDims& d;
  // The context-parallel group attention exchanges keys and values over;
  // NULL with cp = 1.
  Collectives* context = nullptr;
  // The expert group (d.ep ranks) a mixture of experts exchanges its
  // tokens over; null for a single rank.
  Collectives* experts = nullptr;
  // The ranks holding the other rows of the rank's sequences: its context
  // group times, under sequence parallelism, its tensor group. A mixture of
  // experts sums its load-balancing statistics over it; null when the rank
  // holds every row.
  Collectives* sequence = nullptr;

  // The weight every op reads (ParamSet::weight).
  TypedPtr P(int id) const { return params.weight(id); }
  float* G(int id) const { return params.grad(id); }
  // A buffer in the compute dtype.
  Buffer activation(MemCategory category, int64_t elements) const {
    return Buffer(dev, category, elements, dev.info().compute_dtype);
  }
};

// One pass through the skeleton: training (dropout on, what backward reads
// kept or recomputed), evaluation (dropout off) or inference (dropout off,
// nothing kept: each activation is released as soon as the layer is done
// with it, so a step's peak is one branch's transients).
struct LayerPass {
  float dropout = 0, attention_dropout = 0, lora_dropout = 0;
  uint64_t key = 0;  // the micro-batch's random stream (dropout masks)
  bool inference = false;
  // Packed documents ([data] reset_position_ids, reset_attention_mask;
  // docs/finetune.md): device I32 [b, s], each token's position in its
  // document (RoPE) and its document's first position (the attention mask);
  // data NULL when off.
  MH_Tensor document_positions{}, document_starts{};
  // The weight of the micro-batch's load-balancing loss in the objective
  // (mixture of experts): 1 / micro-batches per step (the backward reads it).
  float aux_weight = 0;
};

// Where a layer draws dropout masks; with the layer (-1: the embedding) and
// the micro-batch's key each names one random stream, so recomputation and
// every parallel layout draw the same masks.
enum DropoutSite {
  kDropoutSiteEmbedding = 0,
  kDropoutSiteAttention = 1,
  kDropoutSiteMlp = 2,
  kDropoutSiteProbs = 3,
  kDropoutSiteLora = 4
};
inline uint64_t dropout_stream(uint64_t key, int64_t layer, DropoutSite site) {
  return rng::splitmix64(key ^ rng::splitmix64(uint64_t(layer * 8 + site)));
}

}  // namespace mh
