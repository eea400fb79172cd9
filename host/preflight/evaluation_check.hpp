// What megahost --evaluate needs before it runs, reported with the other
// problems of the configuration.
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"

namespace mh {

// The other modes of the command line, which --evaluate cannot be combined with.
struct OtherModes {
  bool dry_run = false, calibrate = false;
};

// Reports, naming the flag or key and the fix: a mode beside --evaluate
// (--dry_run, --calibrate, a [tuner] or [generate] section), and a config that gives no
// split to evaluate (no valid or test weight in data.split, or neither
// data.valid_paths nor data.test_paths when the datasets are listed per split).
void check_evaluation(const Config& config, const Assembly& assembly, const OtherModes& other, Diagnostics& diag);

}  // namespace mh
