// How the ranks of a nccl world launched by mpirun find each other: MPI
// tells each process its rank and carries rank 0's ncclUniqueId to all.
// Built with MPI where CMake found it (mpi_bootstrap.cpp); without, creating
// one refuses with a message saying so (no_mpi_bootstrap.cpp).
#pragma once

#include "timeout.hpp"

#include <nccl.h>

#include <cstdint>
#include <cstdlib>

namespace mh::comm::nccl {

// True when this process was started by mpirun (OpenMPI's environment).
inline bool under_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

class MpiBootstrap {
 public:
  // Initialises MPI unless somebody did; fails with DEADLINE_EXCEEDED when
  // rank 0's id does not arrive within `timeout`.
  explicit MpiBootstrap(Clock::duration timeout);
  // Finalises MPI if this initialised it.
  ~MpiBootstrap();
  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  // This process's place among the ranks on its node: its device.
  int32_t local_rank() const { return local_rank_; }
  const ncclUniqueId& id() const { return id_; }

  // Ends every rank (MPI_Abort), after saying which failed and why.
  [[noreturn]] static void abort_world(int32_t rank, const char* reason) noexcept;

 private:
  bool owns_mpi_ = false;
  int32_t rank_ = 0, size_ = 1, local_rank_ = 0;
  ncclUniqueId id_{};
};

}  // namespace mh::comm::nccl
