// SIGINT, SIGTERM (what a cluster scheduler sends before a job's time runs
// out) and SIGUSR1 ask a run to stop: the ranks finish the step, save a
// checkpoint when the run has a checkpoint.dir, write the final record and
// exit with kExitInterrupted. A second signal ends the process at once.
// SIGUSR1 is for mpirun: Open MPI's mpirun forwards SIGUSR1 to every rank
// and then exits with their status, whereas on SIGTERM it sends the ranks
// SIGCONT, SIGTERM one odls_base_sigkill_timeout (1 s) later and SIGKILL
// one more later, and exits 1 (docs/checkpoint.md).
//
// The tools that cannot resume (generate, --evaluate, megahost_prepare,
// megahost_convert, a checkpoint import) install the same handlers and
// abandon their work where it can stop cleanly: stop_if_signalled throws
// Interrupted, the destructors on the way out remove what was written, and
// main exits with interrupted_status (the shell's 128 + N: 130, 143).
#pragma once

#include <megahost/error.hpp>

#include <string>

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

// Work abandoned on a stop signal; what() says what was abandoned.
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& what);
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Throws Interrupted("received SIGINT while <doing>") when a stop signal came.
void stop_if_signalled(const std::string& doing);

// 128 + the signal, as a shell reports a process a signal ended.
constexpr int interrupted_status(int signal) { return 128 + signal; }

}  // namespace mh
