// The bootstrap of a build without MPI: a run under mpirun is refused.
#include "mpi_bootstrap.hpp"

#include <megahost/error.hpp>

#include <cstdio>
#include <cstdlib>

namespace mh::comm::nccl {

MpiBootstrap::MpiBootstrap(Clock::duration) {
  throw Error(MH_UNAVAILABLE,
              "comm nccl: started by mpirun (OMPI_COMM_WORLD_SIZE is set), but this build has no MPI to exchange "
              "the NCCL id with; install MPI (libopenmpi-dev) and rebuild, or run one process with "
              "comm.world_size ranks");
}

MpiBootstrap::~MpiBootstrap() = default;

void MpiBootstrap::abort_world(int32_t rank, const char* reason) noexcept {
  std::fprintf(stderr, "megahost comm nccl: rank %d failed: %s\n", rank,
               reason != nullptr ? reason : "no reason given");
  std::abort();
}

}  // namespace mh::comm::nccl
