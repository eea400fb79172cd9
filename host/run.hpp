// Runs an assembled pipeline: trains, or tunes when the config has [tuner].
#pragma once

#include <string>

#include "assembly.hpp"
#include "config.hpp"

namespace mh {

struct RunFlags {
  bool dry_run = false;
  std::string metrics_out;
  bool report_memory = false;
  std::string grads_out;
};

// Returns the process exit status; throws mh::Error on failure.
int run(const Assembly& assembly, const Config& config, const RunFlags& flags);

}  // namespace mh
