// What the engine's ranks do before a step, decided by the world's rank 0
// (the one that serves HTTP) and sent to every rank as bytes: the slots to
// release, the sequences to admit, or the end of serving.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "generate/step_batch.hpp"

namespace mh::serve {

struct StepPlan {
  bool stop = false;
  std::vector<int64_t> release;
  std::vector<std::pair<int64_t, generate::Sequence>> admit;
};

std::vector<uint8_t> encode(const StepPlan& plan);
// Reads what encode wrote (on the ranks of one run: not outside input).
StepPlan decode_plan(std::span<const uint8_t> bytes);
// Applies the plan's releases and admissions to a rank's batch.
void apply(const StepPlan& plan, generate::StepBatch& batch);

}  // namespace mh::serve
