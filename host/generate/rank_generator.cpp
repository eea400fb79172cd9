#include "generate/rank_generator.hpp"

#include <chrono>

#include "generate/step_batch.hpp"
#include "run/stop_signals.hpp"

namespace mh::generate {
namespace {

using Clock = std::chrono::steady_clock;

BatchShape batch_shape(const Job& job) {
  // A whole prompt is prefilled in one step, as a batch job has no decode
  // rows waiting on it that a chunked prefill would let through sooner.
  return BatchShape{job.batch, job.capacity, job.batch * job.capacity, job.vocab};
}

bool finished(const Job& job, const Outcome& o, const StepBatch& batch, int64_t slot) {
  return (job.stop_at_eod && o.tokens.back() == job.eod) || int64_t(o.tokens.size()) == job.max_new_tokens ||
         batch.full(slot);
}

// World rank 0's word, so that every rank stops after the same step.
bool stop_requested(StepBatch& batch) {
  return batch.from_lead({uint8_t(stop_signal() != 0)})[0] != 0;
}

// Each free slot takes the next prompt; a finished request's slot is free
// at the next step. A stop signal ends the loop between two steps.
std::vector<Outcome> serve(StepBatch& batch, const Job& job, bool& stopped) {
  std::vector<Outcome> out(job.prompts.size());
  std::vector<int64_t> request(size_t(batch.slots()), -1);
  size_t next = 0;
  const Clock::time_point start = Clock::now();
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  for (;;) {
    for (int64_t k = 0; k < batch.slots() && next < job.prompts.size(); ++k) {
      if (request[size_t(k)] >= 0) continue;
      batch.admit(k, Sequence{job.prompts[next], job.sampling, next});
      request[size_t(k)] = int64_t(next);
      out[next++].admitted = now();
    }
    if ((stopped = stop_requested(batch))) break;
    const std::vector<SlotStep> steps = batch.step();
    if (steps.empty()) break;
    const double t = now();
    for (const SlotStep& st : steps) {
      if (st.prefilling) continue;
      Outcome& o = out[size_t(request[size_t(st.slot)])];
      if (o.tokens.empty()) o.first_token = t;
      o.last_token = t;
      o.tokens.push_back(st.token);
      if (!finished(job, o, batch, st.slot)) continue;
      o.done = true;
      batch.release(st.slot);
      request[size_t(st.slot)] = -1;
    }
  }
  return out;
}

}  // namespace

RankResult generate_rank(const RunSetup& setup, const Job& job, int32_t local) {
  StepBatch batch(setup, batch_shape(job), local);
  bool stopped = false;
  std::vector<Outcome> outcomes = serve(batch, job, stopped);
  if (batch.rank() != 0) outcomes.clear();
  return RankResult{std::move(outcomes), batch.memory(), stopped};
}

}  // namespace mh::generate
