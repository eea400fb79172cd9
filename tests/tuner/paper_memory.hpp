// Per-rank memory of a training candidate as the engine's dry run reports
// it, without running one: at the paper's scale a dry run takes from 0.1 s
// (22B, 8 ranks) to 2 s (1T, 512 ranks) per candidate, too slow to answer
// every candidate of a unit test. The candidates train in bf16 mixed
// precision, as the paper's did (docs/engine.md, Precision). The first
// pipeline stage (the fullest) holds 18 bytes per parameter -- f32 master
// values, their bf16 copy for the GEMMs, f32 gradients, AdamW's m and v --
// and, by the engine's own formula (engine/memory_report.hpp; bf16
// activations, 1-byte masks), what the recompute policy keeps of every
// layer and micro-batch in flight.
// paper_test.cpp checks this against real dry runs of the paper's layouts.
#pragma once

#include <megahost/abi.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/memory_report.hpp"
#include "training_cost.hpp"

namespace mh::tuner::testing {

inline constexpr double kActivationBytes = 2;  // bf16
inline constexpr double kBytesPerParameter = 4 + 2 + 4 + 8;

inline ModelDims dims(const Model& m, const MH_Candidate& c) {
  ModelDims d{m.layers, m.hidden, m.heads, m.ffn, m.seq, m.vocab, c.micro_batch};
  d.tp = c.tensor;
  d.sp = c.sequence_parallel != 0;
  return d;
}

// What the policy keeps of one layer for backward: selective drops the
// attention scores, probabilities and mask; full (one layer per group)
// keeps only the layer's input.
inline bool kept(const std::string& recompute, int a) {
  if (recompute == "full") return a == mh::kActLayerInput;
  if (recompute == "selective") return a != mh::kActAttnScores && a != mh::kActAttnProbs && a != mh::kActAttnMask;
  return true;
}

inline double layer_bytes(const ModelDims& d, const std::string& recompute) {
  double out = 0;
  for (int a = 0; a < mh::kActCount; ++a)
    if (kept(recompute, a)) out += activation_bytes(d, kActivationBytes, static_cast<mh::Activation>(a));
  return out;
}

// Chunk-forwards the first stage holds before its first backward: p micro-
// batches under 1F1B, p v + p - 1 chunks interleaved ([K22] 4.2.3), never
// more than the step has.
inline double layers_in_flight(const Model& m, const MH_Candidate& c) {
  const int64_t microbatches = m.global_batch / (int64_t(c.micro_batch) * c.data);
  const int64_t p = c.pipeline, v = c.virtual_stages;
  const int64_t chunks = std::min(v == 1 ? p : p * v + p - 1, microbatches * v);
  return double(chunks) * double(m.layers) / double(c.pipeline * c.virtual_stages);
}

inline uint64_t engine_memory(const Model& m, const MH_Candidate& c) {
  Layout l;
  l.t = c.tensor, l.p = c.pipeline, l.v = c.virtual_stages, l.d = c.data, l.b = c.micro_batch;
  const ModelDims d = dims(m, c);
  const std::string recompute = c.recompute;
  double bytes = kBytesPerParameter * double(params_per_rank(m, l, 0)) + layer_bytes(d, recompute) * layers_in_flight(m, c);
  if (recompute == "full") bytes += layer_bytes(d, "none");  // the layer being recomputed
  if (c.pipeline == 1) bytes += double(m.seq) * c.micro_batch * double(m.vocab) * 4 / c.tensor;  // fp32 logits
  return uint64_t(bytes);
}

}  // namespace mh::tuner::testing
