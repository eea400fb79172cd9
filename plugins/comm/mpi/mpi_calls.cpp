#include "mpi_calls.hpp"

#include <megahost/error.hpp>

#include <climits>
#include <string>
#include <thread>

namespace mh::comm::mpi {

void check(int rc, const char* function) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(rc, &error_class);
  const MH_ErrorCode code = error_class == MPI_ERR_TRUNCATE ? MH_INVALID_ARGUMENT : MH_UNAVAILABLE;
  throw Error(code, std::string(function) + " failed: " + std::string(text, length));
}

MPI_Datatype datatype(const Call& call) {
  if (reduces(call.kind)) {
    switch (call.dtype) {
      case MH_F32: return MPI_FLOAT;
      case MH_I32: return MPI_INT32_T;
      case MH_I64: return MPI_INT64_T;
    }
  }
  switch (call.element_size) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

MPI_Op reduce_op(const Call& call) { return call.op == MH_REDUCE_MAX ? MPI_MAX : MPI_SUM; }

namespace {

int as_int(int64_t n) {
  require(n <= INT_MAX,
          std::to_string(n) + " elements exceed MPI's int count " + std::to_string(INT_MAX) + "; split the buffer",
          MH_UNIMPLEMENTED);
  return static_cast<int>(n);
}

}  // namespace

int count(const Call& call) { return as_int(call.count); }

Blocks blocks(const std::vector<int64_t>& counts) {
  Blocks out;
  int64_t offset = 0;
  for (int64_t n : counts) {
    out.counts.push_back(as_int(n));
    out.displacements.push_back(as_int(offset));
    offset += n;
  }
  return out;
}

bool complete_by(MPI_Request& request, Clock::time_point deadline, MPI_Status& status,
                 const std::function<void()>& while_waiting) {
  constexpr int kSpins = 100;
  constexpr auto kNap = std::chrono::microseconds(20);
  for (int tests = 0;; ++tests) {
    int done = 0;
    check(MPI_Test(&request, &done, &status), "MPI_Test");
    if (done != 0) return true;
    if (Clock::now() >= deadline) return false;
    if (tests < kSpins) continue;
    if (while_waiting) while_waiting();
    std::this_thread::sleep_for(kNap);
  }
}

}  // namespace mh::comm::mpi
