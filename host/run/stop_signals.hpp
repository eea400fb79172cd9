// SIGINT, SIGTERM (what a cluster scheduler sends before a job's time runs
// out) and SIGUSR1 ask a run to stop: the ranks finish the step, save a
// checkpoint when the run has a checkpoint.dir, write the final record and
// exit with kExitInterrupted. A second signal ends the process at once.
// SIGUSR1 is for mpirun: Open MPI's mpirun forwards SIGUSR1 to every rank
// and then exits with their status, whereas on SIGTERM it sends the ranks
// SIGCONT, SIGTERM one odls_base_sigkill_timeout (1 s) later and SIGKILL
// one more later, and exits 1 (docs/checkpoint.md).
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
// "SIGTERM", ...
const char* stop_signal_name(int signal);

}  // namespace mh
