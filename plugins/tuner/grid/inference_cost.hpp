// The cost model of generating `output` tokens after a `prompt` for a batch
// of sequences: the prompt's forward pass (GEMM-bound), then one forward
// per new token reading every weight and the key/value cache (bound by
// memory bandwidth through the GEMM roofline), the stages of a pipeline in
// sequence. megahost's engine has no generation path, so the memory is
// modelled too: weights, the key/value cache and the prompt's largest
// transients.
#pragma once

#include <cstdint>

#include "layout.hpp"
#include "machine.hpp"

namespace mh::tuner {

struct InferenceRequest {
  int64_t prompt = 0, output = 0;
};

struct InferenceCost {
  double latency_seconds = 0;  // one batch, prompt to last token
  double tokens_per_s = 0;     // generated tokens per second over all d replicas
  uint64_t memory_bytes = 0;   // per rank
};

InferenceCost inference(const Machine& machine, const Model& model, const Layout& layout, const Placement& where,
                        const InferenceRequest& request);

}  // namespace mh::tuner
