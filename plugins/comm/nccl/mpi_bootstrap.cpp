#include "mpi_bootstrap.hpp"

#include "nccl_calls.hpp"

#include <megahost/error.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace mh::comm::nccl {
namespace {

void check_mpi(int rc, const char* function) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(MH_UNAVAILABLE, std::string("comm nccl: ") + function + ": " + std::string(text, length));
}

}  // namespace

MpiBootstrap::MpiBootstrap(Clock::duration timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    // abort() may come from any thread.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  local_rank_ = local != nullptr ? std::atoi(local) : rank_;
  if (rank_ == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id_);
    require(result == ncclSuccess, "comm nccl: ncclGetUniqueId: " + describe(result, nullptr), error_code(result));
  }
  // Non-blocking, so that a rank that never starts gives a timeout, not a hang.
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(&id_, sizeof(id_), MPI_BYTE, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
  const bool arrived = poll_until(Clock::now() + timeout, [&] {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  });
  require(arrived, "comm nccl: " + timed_out(timeout) + " waiting for rank 0's NCCL id over MPI", MH_DEADLINE_EXCEEDED);
}

MpiBootstrap::~MpiBootstrap() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && finalized == 0) MPI_Finalize();
}

void MpiBootstrap::abort_world(int32_t rank, const char* reason) noexcept {
  std::fprintf(stderr, "megahost comm nccl: rank %d failed: %s; stopping every rank with MPI_Abort\n", rank,
               reason != nullptr ? reason : "no reason given");
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

}  // namespace mh::comm::nccl
