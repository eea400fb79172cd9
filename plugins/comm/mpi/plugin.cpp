// The comm_mpi plugin: one process per rank under mpirun.
#include "mpi_comm.hpp"

MH_PLUGIN("comm_mpi", "0.1.0", mh::comm::mpi::mpi_component())
