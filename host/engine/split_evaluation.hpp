// Evaluation over a whole split: every sample exactly once, whatever the
// layout, and the figures a user reads from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mh {

// One micro-batch of a pass over a split: samples [first_sample,
// first_sample + b), of which the first `counted` are the split's.
struct SplitBatch {
  int64_t first_sample, counted;
};

// The micro-batches replica `replica` of `replicas` runs to visit each of
// a split's `samples` once: global micro-batch g holds samples [g b, g b + b)
// and runs on replica g % replicas. The last one, filled up past the
// split's end so that its shape stays whole, counts only the split's
// samples. Every rank of a replica's tensor and pipeline groups gets the
// same list, as their collectives need.
std::vector<SplitBatch> whole_split_batches(int64_t samples, int64_t micro_batch, int32_t replicas, int32_t replica);

struct SplitLoss {
  double loss = 0;      // mean per token
  int64_t tokens = 0;   // the split's, each counted once
  double seconds = 0;   // of the pass, on this rank

  // exp(loss), held finite for JSON.
  double perplexity() const;
  double tokens_per_s() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
};

// "valid: loss 2.5012, perplexity 12.20 over 123456 tokens (45678 tokens/s)"
std::string split_line(const std::string& split, const SplitLoss& r);
// {"evaluate": split, "loss", "perplexity", "tokens", "tokens_per_s"}
nlohmann::json split_record(const std::string& split, const SplitLoss& r);

}  // namespace mh
