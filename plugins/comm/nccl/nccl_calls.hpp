// Thin helpers over NCCL and the CUDA runtime for the nccl communicator:
// error translation, the NCCL type and count of a validated Call, the
// nonblocking configuration, and waiting against a deadline.
#pragma once

#include "collective.hpp"
#include "timeout.hpp"

#include <megahost/cuda_check.hpp>
#include <megahost/error.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

namespace mh::comm::nccl {

// INVALID_ARGUMENT for a bad call, UNAVAILABLE when a peer or the network
// failed, INTERNAL otherwise.
MH_ErrorCode error_code(ncclResult_t result);

// "<NCCL's name for result>: <NCCL's last error on comm>"
std::string describe(ncclResult_t result, ncclComm_t comm);

// The number of CUDA devices; MH_UNAVAILABLE "no CUDA device: ..." if none.
int device_count();

// Reductions move their real type; everything else moves bytes.
ncclDataType_t datatype(const Call& call);
size_t count(const Call& call);
ncclRedOp_t reduce_op(const Call& call);

// Every communicator is nonblocking: calls that would wait for peers return
// ncclInProgress instead, so that every wait here has a deadline.
ncclConfig_t nonblocking_config();

// Calls done() until it returns true (then true) or `deadline` passes
// (false). Spins briefly, then sleeps 20 us between calls so that ranks on
// the same cores leave them to each other.
template <class Done>
bool poll_until(Clock::time_point deadline, Done&& done) {
  for (int calls = 0;; ++calls) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    if (calls >= 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The state of `comm` once it leaves ncclInProgress (ncclSuccess or an
// error), or ncclInProgress if `deadline` comes first.
ncclResult_t await(ncclComm_t comm, Clock::time_point deadline);

// Throws INVALID_ARGUMENT unless `ptr` is memory of CUDA device `device`.
void require_device_memory(const char* buffer, const void* ptr, int device);

}  // namespace mh::comm::nccl
