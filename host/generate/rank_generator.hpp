// One rank of a generate run: its share of the model (tensor shard,
// pipeline stage) in the compute dtype, the KV cache of its layers, and the
// serving loop. Requests are served by continuous batching: a finished
// sequence's cache slot takes the next request at the next step, whose
// prompt is prefilled in the same forward as the others' decode rows. Every
// rank runs the same loop on the same tokens, so they agree on each step
// without exchanging anything but the sampled tokens, and whether world
// rank 0 received a stop signal: then every rank stops after the same step.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/memory.hpp"
#include "engine/trainer.hpp"
#include "generate/job.hpp"
#include "generate/rank_memory.hpp"

namespace mh::generate {

// What world rank 0 learns (empty elsewhere): each request's outcome and
// every rank's memory peaks.
struct RankResult {
  std::vector<Outcome> outcomes;
  std::vector<RankMemory> memory;
  bool stopped = false;  // by a stop signal, before every request was done
};
// Runs rank `local` of this process to the end of the job.
RankResult generate_rank(const RunSetup& setup, const Job& job, int32_t local);

}  // namespace mh::generate
