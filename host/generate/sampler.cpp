#include "generate/sampler.hpp"

#include <megahost/rng.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mh::generate {
namespace {

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The candidates by falling logit (ties by id), cut to top_k.
std::vector<int32_t> ranked(std::span<const float> logits, int64_t top_k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const size_t keep = top_k > 0 ? std::min(size_t(top_k), ids.size()) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(keep), ids.end(), before);
  ids.resize(keep);
  return ids;
}

}  // namespace

int32_t sample(std::span<const float> logits, const Sampling& s, uint64_t request, uint64_t token_index) {
  if (s.temperature == 0) return argmax(logits);
  const std::vector<int32_t> ids = ranked(logits, s.top_k);
  // Probabilities in double over the candidates, largest first.
  std::vector<double> p(ids.size());
  const double top = double(logits[ids[0]]);
  for (size_t i = 0; i < ids.size(); ++i) p[i] = std::exp((double(logits[ids[i]]) - top) / s.temperature);
  double total = std::accumulate(p.begin(), p.end(), 0.0);
  // The nucleus: the fewest candidates whose probability reaches top_p, and
  // never fewer than the likeliest one (top_p = 0 is greedy).
  size_t keep = p.size();
  if (s.top_p < 1) {
    double mass = p[0];
    for (keep = 1; keep < p.size() && mass < s.top_p * total;) mass += p[keep++];
    total = mass;
  }
  const double u = double(rng::uniform(s.seed, request << 32 | (token_index & 0xFFFFFFFFu))) * total;
  double cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += p[i];
    if (u < cumulative) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace mh::generate
