// CUDA runtime status codes as mh::Error, for plugins that drive a CUDA
// device (include only where the CUDA runtime's headers are). One mapping
// for every plugin: an allocation failure is MH_RESOURCE_EXHAUSTED (the
// caller can free and retry, or report memory), anything else MH_INTERNAL.
#pragma once

#include <megahost/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace mh {

// Throws unless `status` is cudaSuccess, as "<what>: <name>: <text>".
inline void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  throw Error(status == cudaErrorMemoryAllocation ? MH_RESOURCE_EXHAUSTED : MH_INTERNAL,
              what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace mh
