// The kernels_cuda plugin: one component, kernels "cuda". Loading it touches
// no device; create does (and fails with MH_UNAVAILABLE where there is none).
#include "cuda_kernels.hpp"

MH_PLUGIN("kernels_cuda", "0.1.0",
          mh::component<mh::kernels::CudaKernels>("cuda", "0.1.0",
                                                  "one CUDA device: cuBLAS GEMM and our kernels, bf16 or fp32",
                                                  mh::kernels::CudaKernels::options))
