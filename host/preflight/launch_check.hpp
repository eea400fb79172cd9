// Whether the way megahost was launched fits the communicator the config
// chose: under mpirun, a comm that keeps its ranks in one process (threads)
// would make every process train its own copy and write the same files.
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"

#include <string>

namespace mh {

// The world size an MPI launcher announced to this process (Open MPI, then
// MPICH's and PMIx's process managers), or 0 when none started it;
// `variable` names the variable read.
long mpi_launched_size(std::string& variable);

// Reports, at comm.plugin, a threads communicator in a process that an MPI
// launcher started as one of several; at comm.world_size, a size other than
// the launcher's for a communicator that takes its ranks from the launcher.
void check_launch(const Config& config, const Assembly& assembly, Diagnostics& diag);

}  // namespace mh
