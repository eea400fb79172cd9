// LayerNorm forward and backward, one block per row.
#include "ops/columns.cuh"

namespace mh::kernels::gpu {
namespace {

__global__ void layernorm_forward_kernel(Floats out, float* mean, float* rstd, Floats x, Floats weight, Floats bias,
                                         int64_t N, int64_t C, float eps) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t row = n * C;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += load(x, row + c);
    const float m = block_sum(sum) / static_cast<float>(C);
    // Two passes: the variance of centred values does not cancel like E[x^2] - m^2.
    float var = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float d = load(x, row + c) - m;
      var += d * d;
    }
    const float s = 1.0f / sqrtf(block_sum(var) / static_cast<float>(C) + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      store(out, row + c, (load(x, row + c) - m) * s * load(weight, c) + load(bias, c));
    if (threadIdx.x == 0) {
      mean[n] = m;
      rstd[n] = s;
    }
  }
}

// dx += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd, with
// dnorm = dout * weight and norm = (x - mean) * rstd.
__global__ void layernorm_dx_kernel(Floats dx, Floats dout, Floats x, Floats weight, const float* mean,
                                    const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int64_t row = n * C;
    const float m = mean[n], s = rstd[n];
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float dnorm = load(dout, row + c) * load(weight, c);
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * (load(x, row + c) - m) * s;
    }
    const float dnorm_mean = block_sum(dnorm_sum) / static_cast<float>(C);
    const float dnorm_norm_mean = block_sum(dnorm_norm_sum) / static_cast<float>(C);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float norm = (load(x, row + c) - m) * s;
      const float d = (load(dout, row + c) * load(weight, c) - dnorm_mean - norm * dnorm_norm_mean) * s;
      store(dx, row + c, load(dx, row + c) + d);
    }
  }
}

// (dweight, dbias) terms of row n, column c: (dout * norm, dout)
struct NormGradTerm {
  Floats dout, x;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ float2 operator()(int64_t n, int64_t c) const {
    const float g = load(dout, n * C + c);
    return make_float2(g * (load(x, n * C + c) - mean[n]) * rstd[n], g);
  }
};

}  // namespace

void layernorm_forward(cudaStream_t stream, Floats out, float* mean, float* rstd, Floats x, Floats weight,
                       Floats bias, int64_t N, int64_t C, float eps) {
  layernorm_forward_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(out, mean, rstd, x, weight, bias, N, C, eps);
  check_launch("layernorm");
}

// The parameter gradients first: they read dout, which dx may overwrite.
void layernorm_backward(cudaStream_t stream, Floats dx, Floats dweight, Floats dbias, Floats dout, Floats x,
                        Floats weight, const float* mean, const float* rstd, int64_t N, int64_t C, void* scratch) {
  column_sums(stream, "layernorm_bwd", NormGradTerm{dout, x, mean, rstd, C}, N, C, scratch, dweight, dbias);
  layernorm_dx_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(dx, dout, x, weight, mean, rstd, N, C);
  check_launch("layernorm_bwd");
}

}  // namespace mh::kernels::gpu
