// The serving loop every rank of the layout runs. Before each step the
// world's rank 0 (the lead, which serves HTTP) plans it — frees the slots of
// finished and abandoned requests, admits queued requests into free slots —
// and sends the plan to every rank; the ranks apply it and step their batch
// together; the lead turns each slot's new token into its request's text
// and ends a choice at its stop sequence, the end-of-document token,
// max_tokens or a full slot. Draining (SIGTERM) serves what was accepted,
// then stops every rank.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/tokenizer.hpp"
#include "generate/step_batch.hpp"
#include "serve/request_queue.hpp"
#include "serve/server_metrics.hpp"
#include "serve/step_plan.hpp"
#include "serve/text_stream.hpp"

namespace mh::serve {

struct LeadSettings {
  double timeout_s = 600;  // longest a request waits in the queue
  int32_t eod = -1;        // ends a choice (not shown)
};

class Lead {
 public:
  Lead(RequestQueue& queue, ServerMetrics& metrics, const data::Tokenizer& tokenizer, LeadSettings settings,
       int64_t slots)
      : queue_(queue), metrics_(metrics), tokenizer_(tokenizer), settings_(settings), slots_(size_t(slots)) {}

  // The next step's plan; waits a little for a request when there is
  // nothing to do (followers then wait in the plan's broadcast, well
  // within the communicator's timeout).
  StepPlan plan(bool draining);
  // Takes a step's results.
  void record(const std::vector<generate::SlotStep>& steps, const generate::StepBatch& batch);
  // Ends every request accepted without an answer: the engine failed.
  void fail_all(const std::string& error);

 private:
  struct Running {
    std::shared_ptr<Request> request;
    size_t choice = 0;
    TextStream text;
    int64_t generated = 0;
    Clock::time_point first{}, last{};
  };
  void admit(StepPlan& plan);
  void finish(int64_t slot, const char* reason, bool whole_text);
  int64_t running() const;

  RequestQueue& queue_;
  ServerMetrics& metrics_;
  const data::Tokenizer& tokenizer_;
  LeadSettings settings_;
  std::vector<std::optional<Running>> slots_;
  std::vector<int64_t> finished_;  // slots to free at the next plan
};

// Runs a rank's part of the serving loop until the lead stops it; `lead`
// on world rank 0 only, `draining` asked there.
void serve_rank(generate::StepBatch& batch, Lead* lead, const std::function<bool()>& draining);

}  // namespace mh::serve
