// RMSNorm forward and backward (Llama), one block per row.
#include "ops/columns.cuh"

namespace mh::kernels::gpu {
namespace {

__global__ void rmsnorm_forward_kernel(Floats out, float* rstd, Floats x, const float* weight, int64_t N, int64_t C,
                                       float eps) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t row = n * C;
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float v = load(x, row + c);
      squares += v * v;
    }
    const float s = 1.0f / sqrtf(block_sum(squares) / static_cast<float>(C) + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) store(out, row + c, load(x, row + c) * s * weight[c]);
    if (threadIdx.x == 0) rstd[n] = s;
  }
}

// dx += (dout * weight - norm * mean(dout * weight * norm)) * rstd, with norm = x * rstd.
__global__ void rmsnorm_dx_kernel(float* dx, Floats dout, Floats x, const float* weight, const float* rstd, int64_t N,
                                  int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t row = n * C;
    const float s = rstd[n];
    float dnorm_norm_sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dnorm_norm_sum += load(dout, row + c) * weight[c] * load(x, row + c) * s;
    const float dnorm_norm_mean = block_sum(dnorm_norm_sum) / static_cast<float>(C);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float norm = load(x, row + c) * s;
      dx[row + c] += (load(dout, row + c) * weight[c] - norm * dnorm_norm_mean) * s;
    }
  }
}

// The dweight term of row n, column c: dout * norm (no second sum).
struct RmsWeightGradTerm {
  Floats dout, x;
  const float* rstd;
  int64_t C;
  __device__ float2 operator()(int64_t n, int64_t c) const {
    return make_float2(load(dout, n * C + c) * load(x, n * C + c) * rstd[n], 0.0f);
  }
};

}  // namespace

void rmsnorm_forward(cudaStream_t stream, Floats out, float* rstd, Floats x, const float* weight, int64_t N, int64_t C,
                     float eps) {
  rmsnorm_forward_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(out, rstd, x, weight, N, C, eps);
  check_launch("rmsnorm");
}

// dweight first: it reads dout, which dx may overwrite.
void rmsnorm_backward(cudaStream_t stream, float* dx, float* dweight, Floats dout, Floats x, const float* weight,
                      const float* rstd, int64_t N, int64_t C, void* scratch) {
  column_sums(stream, "rmsnorm_bwd", RmsWeightGradTerm{dout, x, rstd, C}, N, C, scratch, Floats{dweight, false},
              Floats{nullptr, false});
  rmsnorm_dx_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(dx, dout, x, weight, rstd, N, C);
  check_launch("rmsnorm_bwd");
}

}  // namespace mh::kernels::gpu
