// The generation engine one step at a time, as one rank runs it: the KV
// cache's slots, each serving one sequence. A sequence is admitted into a
// free slot; each step packs the rows of every busy slot — a chunk of a
// prompt being prefilled, or the one token a decoding sequence sampled last
// — into one forward over the rank's layers (continuous batching), and
// returns each slot's new token; a slot is released to take another
// sequence at the next step. Every rank of the layout makes the same calls
// in the same order (the world's rank 0 decides them and shares its
// decisions with from_lead), and every rank gets the same tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/trainer.hpp"
#include "generate/rank_memory.hpp"
#include "generate/sampler.hpp"

namespace mh::generate {

struct Sequence {
  std::vector<int32_t> prompt;  // not empty, shorter than the slot's capacity
  Sampling sampling;
  uint64_t stream = 0;           // the draws' key beside sampling.seed: (seed, stream, token index)
  int32_t top_logprobs = -1;     // -1: no log-probabilities; else each new token's, with this many alternatives
  bool prompt_logprobs = false;  // also each prompt token's after the first (with top_logprobs alternatives)
};

// A token's log-probability under the model (the softmax of its logits at
// temperature 1, whatever the sampling), and the likeliest tokens' there.
struct Scored {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// What one step did for one busy slot.
struct SlotStep {
  int64_t slot = 0;
  bool prefilling = false;     // the prompt is not all in the cache yet: no new token
  int32_t token = -1;          // the new token
  std::vector<Scored> prompt;  // the prompt tokens this step scored (prompt_logprobs)
  std::optional<Scored> scored;  // the new token's (top_logprobs >= 0)
};

struct BatchShape {
  int64_t slots = 1;          // sequences served at once
  int64_t capacity = 0;       // positions per slot, at most model.seq_len
  int64_t prefill_chunk = 0;  // prompt rows one step prefills at most, over all slots (at least 1)
  int64_t vocab = 0;          // ids sampled from: the tokenizer's (a model's vocabulary may exceed it)
};

class StepBatch {
 public:
  StepBatch(const RunSetup& s, const BatchShape& shape, int32_t local);
  ~StepBatch();
  StepBatch(const StepBatch&) = delete;
  StepBatch& operator=(const StepBatch&) = delete;

  int32_t rank() const;  // the world's
  int64_t slots() const;
  int64_t capacity() const;
  bool busy(int64_t slot) const;
  // Whether a busy slot's cache is full: it cannot take another token.
  bool full(int64_t slot) const;
  void admit(int64_t slot, Sequence seq);
  void release(int64_t slot);
  // One forward over every busy slot, in slot order; empty when none is.
  std::vector<SlotStep> step();
  // World rank 0's bytes, on every rank (every rank calls it).
  std::vector<uint8_t> from_lead(std::vector<uint8_t> bytes);
  // Every rank's peaks on world rank 0, empty elsewhere; every rank calls it.
  std::vector<RankMemory> memory();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mh::generate
