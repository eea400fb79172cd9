// cuBLAS status codes as mh::Error, beside the SDK's check_cuda.
#pragma once

#include <megahost/cuda_check.hpp>

#include <cublas_v2.h>

#include <string>

namespace mh::kernels {

// The SDK's check_cuda's mapping for cuBLAS: MH_RESOURCE_EXHAUSTED for CUBLAS_STATUS_ALLOC_FAILED.
void check_cublas(cublasStatus_t status, const std::string& what);

}  // namespace mh::kernels
