#include "engine/split_evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mh {

std::vector<SplitBatch> whole_split_batches(int64_t samples, int64_t micro_batch, int32_t replicas, int32_t replica) {
  std::vector<SplitBatch> batches;
  const int64_t total = (samples + micro_batch - 1) / micro_batch;
  for (int64_t g = replica; g < total; g += replicas)
    batches.push_back({g * micro_batch, std::min(micro_batch, samples - g * micro_batch)});
  return batches;
}

// Past e^700 a double overflows; a loss that large is a broken model anyway.
double SplitLoss::perplexity() const { return std::exp(std::min(loss, 700.0)); }

std::string split_line(const std::string& split, const SplitLoss& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%s: loss %.4f, perplexity %.2f over %lld tokens (%.0f tokens/s)", split.c_str(),
                r.loss, r.perplexity(), static_cast<long long>(r.tokens), r.tokens_per_s());
  return line;
}

nlohmann::json split_record(const std::string& split, const SplitLoss& r) {
  return {{"evaluate", split},
          {"loss", r.loss},
          {"perplexity", r.perplexity()},
          {"tokens", r.tokens},
          {"tokens_per_s", r.tokens_per_s()}};
}

}  // namespace mh
