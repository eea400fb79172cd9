// Ranks in several processes (mpirun, NCCL) each read their own config and
// command line. Before anything sized by the config crosses the network,
// they agree on the run: a rank started with another model, batch or plugin
// would otherwise call collectives of other sizes, which corrupts memory
// inside MPI rather than failing.
#pragma once

#include <megahost/abi.h>

#include "plugins/assembly.hpp"

namespace mh {

// With the processes' first ranks over the world group, compares a digest of
// every resolved option (host sections and each slot's plugin, version and
// options); throws mh::Error naming the ranks and keys that differ from rank
// 0's. Nothing to do when every rank lives in this process.
void agree_on_run(const MH_CommApi* api, MH_Instance* comm, const MH_CommInfo& info, const Assembly& assembly);

}  // namespace mh
