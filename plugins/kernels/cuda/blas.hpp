// GEMM through cuBLAS on the instance's stream, and the peak measurement
// that MFU is reported against.
#pragma once

#include "caching_allocator.hpp"
#include "validate.hpp"

#include <megahost/abi.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace mh::kernels {

class Blas {
 public:
  // The calling thread's device must be the stream's.
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // The product of checked arguments (check_gemm gave `d`): a and b hold the
  // compute dtype, c that or f32; accumulation is f32 either way.
  void gemm(const MH_GemmArgs& args, const GemmDims& d);

 private:
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
};

// FLOP/s of the best of five n x n x n products in `dtype`, after two
// untimed ones. Its buffers go back to the device afterwards.
double measure_gemm_flops(Blas& blas, CachingAllocator& memory, cudaStream_t stream, MH_DType dtype, int64_t n);

}  // namespace mh::kernels
