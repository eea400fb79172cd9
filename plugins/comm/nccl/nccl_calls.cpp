#include "nccl_calls.hpp"

namespace mh::comm::nccl {

MH_ErrorCode error_code(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return MH_INVALID_ARGUMENT;
    case ncclRemoteError:
    case ncclSystemError: return MH_UNAVAILABLE;
    default: return MH_INTERNAL;
  }
}

std::string describe(ncclResult_t result, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return std::string(ncclGetErrorString(result)) + (last != nullptr && *last != '\0' ? std::string(": ") + last : "");
}

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(MH_UNAVAILABLE, std::string("no CUDA device: ") +
                                    cudaGetErrorString(status != cudaSuccess ? status : cudaErrorNoDevice));
  }
  return count;
}

ncclDataType_t datatype(const Call& call) {
  switch (call.dtype) {
    case MH_F32: return ncclFloat32;
    case MH_I32: return ncclInt32;
    case MH_I64: return ncclInt64;
    default: return ncclUint8;
  }
}

size_t count(const Call& call) {
  return datatype(call) == ncclUint8 ? call.bytes() : static_cast<size_t>(call.count);
}

ncclRedOp_t reduce_op(const Call& call) { return call.op == MH_REDUCE_MAX ? ncclMax : ncclSum; }

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

ncclResult_t await(ncclComm_t comm, Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  poll_until(deadline, [&] {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInvalidUsage;
    return state != ncclInProgress;
  });
  return state;
}

void require_device_memory(const char* buffer, const void* ptr, int device) {
  cudaPointerAttributes attributes{};
  const bool known = cudaPointerGetAttributes(&attributes, ptr) == cudaSuccess;
  if (!known) cudaGetLastError();
  const bool device_memory =
      known && (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged);
  require(device_memory && attributes.device == device,
          std::string(buffer) + " is not memory of CUDA device " + std::to_string(device) +
              "; the nccl communicator moves device memory of its rank's device (allocate it through the cuda "
              "kernels)");
}

}  // namespace mh::comm::nccl
