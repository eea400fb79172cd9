// A run whose TOML has [serve]: it loads the model as [generate] does, on
// the run's tensor and pipeline layout, and serves OpenAI's HTTP API until
// SIGTERM or SIGINT, which drains the requests accepted, then exits 0
// (docs/serve.md). World rank 0 serves HTTP; every rank runs the engine.
#pragma once

#include "config/config.hpp"
#include "config/diagnostics.hpp"
#include "engine/trainer.hpp"
#include "plugins/assembly.hpp"
#include "preflight/memory_preflight.hpp"

namespace mh::serve {

// Checks [serve] before anything runs (problems go to diag, exit 2): not
// beside [generate], a chat template that parses.
void check(const Config& config, const Assembly& assembly, Diagnostics& diag);

// Serves until stopped; returns the exit status.
int serve(RunSetup& s, const Config& config, const RankRunner& run_ranks);

}  // namespace mh::serve
