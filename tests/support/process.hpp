// The one way tests start a program: argv (a launcher such as mpiexec
// first, when any), changes to the environment, an optional interrupt (a
// signal sent once a condition holds, as a user's Ctrl-C or a scheduler's
// SIGTERM), a deadline, and the output captured.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace mh::test {

struct Interrupt {
  int signal = 0;              // 0: none
  std::function<bool()> when;  // polled every 5 ms; empty: at once
};

struct ProcessSpec {
  std::vector<std::string> argv;          // argv[0] is a path
  std::vector<std::string> set_env;       // "NAME=value", added
  std::vector<std::string> unset_prefix;  // variables whose names start so are left out
  Interrupt interrupt;
  std::chrono::seconds deadline{120};     // then SIGKILL
  bool stderr_to_stdout = false;          // one stream, in order (a log)
};

struct ProcessExit {
  int status = -1;  // exit status; -1 when a signal ended it
  int signal = 0;   // the signal that ended it
  std::string out, err;
};

// Runs the program to its end; throws std::runtime_error when it cannot start.
ProcessExit run_process(const ProcessSpec& spec);

// `command` run by /bin/sh, for what a shell sets up (closed streams,
// resource limits, a user's quoting).
ProcessSpec shell(const std::string& command);

// mpiexec (MEGAHOST_TEST_MPIEXEC) of `ranks` processes, oversubscribed, and
// the environment OpenMPI needs to run them as root in a container.
std::vector<std::string> mpi_launcher(int ranks);
std::vector<std::string> mpi_environment();

}  // namespace mh::test
