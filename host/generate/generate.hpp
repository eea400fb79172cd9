// A run whose TOML has [generate]: it loads the model (checkpoint.load: a
// Megahost checkpoint or a Hugging Face folder) on the run's tensor and
// pipeline layout and generates a completion for each prompt, instead of
// training (docs/generate.md).
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"
#include "engine/trainer.hpp"
#include "preflight/memory_preflight.hpp"

namespace mh::generate {

// Checks [generate] before anything runs (problems go to diag, exit 2):
// one of prompt and prompts_file, every prompt readable, tokenisable, not
// empty and within model.seq_len.
void check(const Config& config, const Assembly& assembly, Diagnostics& diag);

// Serves every prompt on every rank of `s` (planned as for training, with
// its checkpoint resolved), prints the completions and writes the metrics;
// a dry run prints each rank's memory instead. Returns the exit status.
int serve(RunSetup& s, const Config& config, const RankRunner& run_ranks);

}  // namespace mh::generate
