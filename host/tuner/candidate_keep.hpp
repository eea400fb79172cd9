// The keep table of a training candidate, for the tuner's cost model: its
// recompute policy, created from the candidate's config as the run would
// create it, asked for every layer of the model in its pipeline chunk
// (the tuner splits the layers evenly over the p * v chunks), with the
// engine's rule that a chunk's received input is kept.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "plugins/registry.hpp"

namespace mh {

// keep[l * kActCount + a]: the MH_Decision for activation a of layer l
// (kActivationNames[a], the columns MH_Estimate.activations lists), for the
// model's `layers` layers. Throws mh::Error when the policy cannot
// be created or answered.
std::vector<int32_t> candidate_keep_table(const std::filesystem::path& candidate_config, const Registry& registry,
                                          const MH_Candidate& candidate, int64_t layers);

}  // namespace mh
