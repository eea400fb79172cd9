// What a generate run serves and what it reports back, shared by its ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "generate/sampler.hpp"

namespace mh::generate {

struct Job {
  std::vector<std::vector<int32_t>> prompts;  // token ids, one list per request
  int64_t max_new_tokens = 0;
  int64_t batch = 1;     // sequences served at once: the KV cache's slots
  int64_t capacity = 0;  // positions per slot: the longest prompt plus max_new_tokens, at most seq_len
  Sampling sampling;
  bool stop_at_eod = true;
  int32_t eod = -1;
  // The model's vocabulary, sampled whole: a tokenizer that could not decode
  // all of it is refused before the job is made.
  int64_t vocab = 0;
  bool dry = false;      // one prefill and one decode step of the longest prompts, for the memory plan
};

// One request's outcome; times in seconds from the run's start.
struct Outcome {
  std::vector<int32_t> tokens;  // generated, the end-of-document token included when it stopped there
  double admitted = 0, first_token = 0, last_token = 0;
  bool done = false;  // finished, not cut short by a stop signal
};

}  // namespace mh::generate
