// Whether the way megahost was launched fits the communicator the config
// chose: under mpirun, a comm that keeps its ranks in one process (threads)
// would make every process train its own copy and write the same files.
#pragma once

#include "assembly.hpp"
#include "config.hpp"
#include "diagnostics.hpp"

namespace mh {

// Reports, at comm.plugin, a threads communicator in a process that an MPI
// launcher started as one of several.
void check_launch(const Config& config, const Assembly& assembly, Diagnostics& diag);

}  // namespace mh
