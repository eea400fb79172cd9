// Activation memory as the paper models it (Korthikanti et al. 2022, Table 2)
// generalised to our element sizes, beside what the tracker measured.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/activations.hpp"
#include "engine/memory.hpp"
#include "engine/model.hpp"
#include "engine/transformer.hpp"

#include <span>
#include <vector>

namespace mh {

struct ActivationFormula {
  double per_layer;  // bytes one layer keeps for backward
  double extra;      // embedding dropout mask, final layernorm, logits
  double total(int64_t layers) const { return per_layer * double(layers) + extra; }
};

// The bytes the paper counts for one activation of one layer, with
// activations of e bytes and 1-byte masks, for the layer's parts. Summed
// over every activation: sbh(4e+2)/t_sp + sbh(e(2 + 2k/a) + c e f/h)/t +
// a s^2 b (2e+1)/t, where t_sp is t with sequence parallelism and 1
// without, k the key/value heads and c = 2 for GeLU (FC1's output and
// GeLU's), 3 for SwiGLU (gate and up, and their product). e = 2, k = a,
// f = 4h, GeLU give the paper's sbh(10 + 24/t + 5as/(ht)) and, with SP,
// (sbh/t)(34 + 5as/h); docs/models.md gives the others.
double activation_bytes(const ModelDims& d, double element_bytes, Activation a);

// Per layer: the average over layers of what the policy keeps, so full
// recompute gives e*sbh/t_sp per checkpointed layer and selective drops the
// a s^2 b terms. The transient of recomputing in backward is not modelled,
// as in the paper.
ActivationFormula activation_formula(const ModelDims& d, double element_bytes, const KeepTable& keep);

// A rank's activation peak as the formula predicts it under its pipeline
// schedule: each in-flight (micro-batch, chunk) holds what the policy keeps
// of the chunk's layers, plus the embedding dropout mask on the first chunk
// and the final layernorm and logits on the last; the peak over the
// schedule's order is the answer (p in flight on the first 1F1B stage).
double scheduled_activation_bytes(const ModelDims& d, double element_bytes, const std::vector<ChunkSpec>& chunks,
                                  const KeepTable& keep, std::span<const MH_PipeAction> schedule);

// {"params": bytes, ..., "total": bytes} of the peaks.
nlohmann::json memory_peaks(const MemoryTracker& m);

}  // namespace mh
