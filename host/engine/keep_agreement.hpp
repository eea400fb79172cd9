// Recompute decisions must agree across a tensor group: its ranks run the
// recomputation's collectives together in backward, and a rank that keeps
// what another recomputes waits for a collective that never starts (the
// threads comm times out; MPI and NCCL may deadlock). Checked once, when
// the keep tables are planned.
#pragma once

#include <string>

#include "engine/activations.hpp"
#include "engine/collectives.hpp"

namespace mh {

// Throws mh::Error naming the policy, the ranks and the first layer and
// activation where this rank's `keep` differs from the group's first rank.
void check_keep_tables_agree(Collectives& tensor, const KeepTable& keep, const std::string& policy);

}  // namespace mh
