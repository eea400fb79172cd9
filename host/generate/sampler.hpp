// The next token from a row of logits: greedy (temperature 0), or a draw
// from the softmax at a temperature, restricted to the top k tokens and to
// the nucleus of probability top_p. The draw is a counter-based uniform
// keyed by (seed, request, token index), so it does not depend on the
// layout, the batch a request shares, or which rank samples.
#pragma once

#include <cstdint>
#include <span>

namespace mh::generate {

struct Sampling {
  double temperature = 0;  // 0: greedy
  int64_t top_k = 0;       // 0: every token
  double top_p = 1;        // 1: every token
  uint64_t seed = 0;
};

// logits: the tokenizer's vocabulary. Greedy takes the lowest id among equal
// largest logits.
int32_t sample(std::span<const float> logits, const Sampling& s, uint64_t request, uint64_t token_index);

}  // namespace mh::generate
