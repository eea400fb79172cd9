// The cost model of megahost's generation engine (docs/generate.md): a
// batch of `prompt`-token prompts packed into one prefill forward (attention
// per sequence, K and V written to the cache), then `output` - 1 decode
// steps of one row per sequence, each reading every weight and the cached
// positions; the output layer on each sequence's last row, its
// vocabulary-parallel logits all-gathered over the tensor group and
// sampled on the host. Pipeline stages run in turn over the whole batch.
// Memory is not modelled: the host dry-runs each candidate's generate
// config (weights, KV cache, workspace).
#pragma once

#include <cstdint>

#include "layout.hpp"
#include "machine.hpp"

namespace mh::tuner {

struct InferenceRequest {
  int64_t prompt = 0, output = 0;
};

struct InferenceCost {
  double ttft_seconds = 0;  // prefill through every stage to the first sampled token
  double tpot_seconds = 0;  // one decode step, at the mean context of the decode
  // The latency goal's key: ttft + output * tpot (the prompt to the last
  // token, give or take one step).
  double latency_seconds = 0;
  double tokens_per_s = 0;  // the batch's generated tokens over its latency
};

InferenceCost inference(const Machine& machine, const Model& model, const Layout& layout, const Placement& where,
                        const InferenceRequest& request);

// One forward through one stage for `rows` rows per sequence of the batch,
// each attending to `context` positions (prefill: rows = context = the
// prompt; decode: one row attending to the cache). `first` and `last` add the
// embeddings and the output layer with its logits gather and sampling.
double stage_forward_seconds(const Machine& machine, const Model& model, const Layout& layout, const Placement& where,
                             int64_t rows, int64_t context, bool first, bool last);

}  // namespace mh::tuner
