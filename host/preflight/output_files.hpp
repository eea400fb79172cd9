// The files a run writes, checked before it reads or writes anything: an
// output that is one of the run's inputs would be truncated under it (the
// dataset's .bin, then SIGBUS) and one in a missing folder would fail only
// after the last step.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"
#include "preflight/run_inputs.hpp"

namespace mh {

struct OutputFile {
  std::string source;  // what named it: "--metrics_out", "output.metrics", ...
  std::string path;    // empty: not written
};

// Reports, naming the flag or key and the fix, each output that is one of
// `inputs`, is a folder, or lies in a folder that is missing or not writable
// (with the system's reason).
void check_output_files(const std::vector<OutputFile>& outputs, const RunInputs& inputs, Diagnostics& diag);

}  // namespace mh
