// `megahost --config run.toml` on a config with a [tuner] section: the
// tuner component proposes candidates and ranks them; the host loads the
// hardware profile the tuner names, dry-runs every training candidate for
// its exact per-rank memory, measures the best few with the real engine,
// and writes the ranked and rejected tables and the winner's config.
#pragma once

#include <string>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "plugins/registry.hpp"

namespace mh {

struct TuneFlags {
  std::string plugin_path;  // forwarded to every megahost the search runs
};

// Returns the process exit status: 0 with a winner, 1 when nothing fits.
int tune(const Assembly& assembly, const Config& config, const Registry& registry, const TuneFlags& flags);

}  // namespace mh
