// CUDA runtime and cuBLAS status codes as mh::Error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

namespace mh::kernels {

// Throws mh::Error unless `status` is cudaSuccess: MH_RESOURCE_EXHAUSTED for
// an allocation failure, MH_INTERNAL otherwise, as "<what>: <name>: <text>".
void check_cuda(cudaError_t status, const std::string& what);

// The same for cuBLAS: MH_RESOURCE_EXHAUSTED for CUBLAS_STATUS_ALLOC_FAILED.
void check_cublas(cublasStatus_t status, const std::string& what);

}  // namespace mh::kernels
