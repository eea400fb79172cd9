// SIGINT and SIGTERM (what a cluster scheduler sends before a job's time
// runs out) ask a run to stop: the ranks finish the step, save a
// checkpoint when the run has a checkpoint.dir, write the final record and
// exit with kExitInterrupted. A second signal ends the process at once.
#pragma once

namespace mh {

// EX_TEMPFAIL: stopped on request, resumable.
constexpr int kExitInterrupted = 75;

// Installs the handlers for its lifetime.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

// The signal received since the handlers were installed, or 0.
int stop_signal();

}  // namespace mh
