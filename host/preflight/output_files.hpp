// The files a run writes, checked before it reads or writes anything: an
// output that is one of the run's inputs would be truncated under it (the
// dataset's .bin, then SIGBUS) and one in a missing folder would fail only
// after the last step.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh {

struct OutputFile {
  std::string source;  // what named it: "--metrics_out", "output.metrics", ...
  std::string path;    // empty: not written
};

// Every file the run reads: the config, the dataset's .bin and .idx, the
// tokenizer's files, the plugins.
std::vector<std::filesystem::path> run_inputs(const Config& config, const Assembly& assembly,
                                              const std::vector<LoadedPlugin>& plugins);

// Reports, naming the flag or key and the fix, each output that is one of
// `inputs`, is a folder, or lies in a folder that is missing or not writable
// (with the system's reason).
void check_output_files(const std::vector<OutputFile>& outputs, const std::vector<std::filesystem::path>& inputs,
                        Diagnostics& diag);

}  // namespace mh
