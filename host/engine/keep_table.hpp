// A recompute policy's decision for every activation of a model chunk's
// layers, as the engine keeps them (and as the tuner prices them).
#pragma once

#include "plugins/assembly.hpp"
#include "engine/activations.hpp"
#include "engine/transformer.hpp"

namespace mh {

// Asks `policy` (MH_RecomputeApi::decide) for each activation of each of
// the chunk's layers. A chunk's received input is always kept: only the
// previous stage could recompute it. So are the scores, probabilities and
// mask with the flash core (`backend`), which has none of them: there is
// nothing to recompute, and the tuner prices the table as the engine runs it.
KeepTable keep_table(const Instance& policy, const ChunkSpec& chunk, AttentionBackend backend);

}  // namespace mh
