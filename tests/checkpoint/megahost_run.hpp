// Runs the real megahost binary on the layout-equivalence model with a
// checkpoint folder, optionally interrupting it (a signal once a given step
// is recorded, or a failpoint), and reads back what the resume tests
// compare: exit status, log and each step's loss.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mh::ckpt::test {

struct Outcome {
  int status = -1;  // exit status, or -1 when a signal ended it
  int signal = 0;   // the signal that ended it
  std::string log;  // stderr and stdout
  std::map<int64_t, double> losses;  // step -> loss, exact
  std::vector<std::string> records;  // the metrics file's lines
};

struct Interrupt {
  int signal = 0;          // sent once the metrics record step `after_step`
  int64_t after_step = 0;
  std::string failpoint;   // MEGAHOST_FAILPOINT
};

// megahost --config small.toml with `args` (overrides and flags), started
// by `launcher` when given (mpiexec and its arguments).
Outcome run_megahost(const std::vector<std::string>& args, const Interrupt& interrupt = {},
                     const std::vector<std::string>& launcher = {});

// A fresh, empty scratch folder named for the test.
std::string scratch_dir(const std::string& name);

// The bytes of every rank file of checkpoint folder `dir`, by name.
std::map<std::string, std::string> rank_files(const std::string& dir);

}  // namespace mh::ckpt::test
