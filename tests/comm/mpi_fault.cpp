// Fault injection under mpiexec: after a few all_reduces the last rank
// fails while the others wait in the next one.
//
//   comm_mpi_fault kill   the rank raise(SIGKILL)s itself
//   comm_mpi_fault abort  the rank calls abort() of the communicator
//
// mpiexec must then stop every rank; the survivors' own timeout is long, so
// they finish by themselves only if it does not.
#include "comm_harness.hpp"
#include "mpi_comm.hpp"

#include <csignal>
#include <cstdio>
#include <string>

namespace mh::comm::testing {
namespace {

int run(const std::string& mode) {
  Comm comm(mpi::mpi_component(), {{"timeout_s", 25.0}});
  MH_Group* world = comm.world(0);
  const int32_t rank = comm.api().group_rank(world);
  const int32_t victim = comm.api().group_size(world) - 1;
  for (int32_t step = 0;; ++step) {
    if (step == 3 && rank == victim) {
      std::fprintf(stderr, "rank %d: injecting %s\n", rank, mode.c_str());
      if (mode == "kill") std::raise(SIGKILL);
      comm.api().abort(comm.self(), rank, "injected failure");
    }
    float mine = 1, sum = 0;
    auto a = args<float>({&mine, 1}, {&sum, 1});
    Status s(comm.api().all_reduce(world, &a));
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: step %d: %s\n", rank, step, s.message.c_str());
      return 3;
    }
  }
}

}  // namespace
}  // namespace mh::comm::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s kill|abort\n", argv[0]);
    return 2;
  }
  return mh::comm::testing::run(argv[1]);
}
