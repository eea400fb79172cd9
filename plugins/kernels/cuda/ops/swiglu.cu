// SwiGLU forward and backward, one thread per output column j.
#include "ops/device.cuh"

namespace mh::kernels::gpu {
namespace {

__device__ inline float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void swiglu_forward_kernel(Floats out, Floats x, int64_t ldx, int64_t N, int64_t F) {
  for (int64_t k = first_index(); k < N * F; k += grid_stride()) {
    const int64_t n = k / F, j = k % F;
    const float g = load(x, n * ldx + j);
    store(out, k, g * sigmoid(g) * load(x, n * ldx + F + j));
  }
}

// silu'(g) = s + g s (1 - s), s = sigmoid(g)
__global__ void swiglu_backward_kernel(Floats dx, int64_t lddx, Floats x, int64_t ldx, Floats dout, int64_t N,
                                       int64_t F) {
  for (int64_t k = first_index(); k < N * F; k += grid_stride()) {
    const int64_t n = k / F, j = k % F;
    const float g = load(x, n * ldx + j), up = load(x, n * ldx + F + j), d = load(dout, k), s = sigmoid(g);
    store(dx, n * lddx + j, d * up * (s + g * s * (1.0f - s)));
    store(dx, n * lddx + F + j, d * g * s);
  }
}

}  // namespace

void swiglu_forward(cudaStream_t stream, Floats out, Floats x, int64_t ldx, int64_t N, int64_t F) {
  swiglu_forward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(out, x, ldx, N, F);
  check_launch("swiglu");
}

void swiglu_backward(cudaStream_t stream, Floats dx, int64_t lddx, Floats x, int64_t ldx, Floats dout, int64_t N,
                     int64_t F) {
  swiglu_backward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(dx, lddx, x, ldx, dout, N, F);
  check_launch("swiglu_bwd");
}

}  // namespace mh::kernels::gpu
