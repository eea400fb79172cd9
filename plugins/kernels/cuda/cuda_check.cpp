#include "cuda_check.hpp"

#include <megahost/error.hpp>

namespace mh::kernels {

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? MH_RESOURCE_EXHAUSTED : MH_INTERNAL,
              what + ": " + cublasGetStatusName(status) + ": " + cublasGetStatusString(status));
}

}  // namespace mh::kernels
