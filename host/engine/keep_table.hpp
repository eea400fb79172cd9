// A recompute policy's decision for every activation of a model chunk's
// layers, as the engine keeps them (and as the tuner prices them).
#pragma once

#include "plugins/assembly.hpp"
#include "engine/activations.hpp"
#include "engine/transformer.hpp"

namespace mh {

// Asks `policy` (MH_RecomputeApi::decide) for each activation of each of
// the chunk's layers. A chunk's received input is always kept: only the
// previous stage could recompute it.
KeepTable keep_table(const Instance& policy, const ChunkSpec& chunk);

}  // namespace mh
