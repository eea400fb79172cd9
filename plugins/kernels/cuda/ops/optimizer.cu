// The optimizer's ops: AdamW and the squared gradient norm.
#include "ops/device.cuh"

namespace mh::kernels::gpu {
namespace {

// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p)
__global__ void adamw_kernel(float* param, float* m, float* v, const float* grad, AdamWStep s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = grad[i];
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / s.correction1, v_hat = vi / s.correction2;
    param[i] -= s.lr * (m_hat / (sqrtf(v_hat) + s.eps) + s.weight_decay * param[i]);
  }
}

// In double: the gradient norm of a large model sums ~1e8 squares, far past
// f32's 24 bits. Each block leaves one partial sum.
__global__ void sum_squares_partials(double* partial, Floats x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double value = load(x, i);
    sum += value * value;
  }
  sum = block_reduce(sum, Sum{}, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void sum_squares_total(float* out, const double* partial, int64_t blocks) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < blocks; i += blockDim.x) sum += partial[i];
  sum = block_reduce(sum, Sum{}, 0.0);
  if (threadIdx.x == 0) out[0] += static_cast<float>(sum);
}

}  // namespace

void adamw(cudaStream_t stream, float* param, float* m, float* v, const float* grad, const AdamWStep& step,
           int64_t n) {
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(param, m, v, grad, step, n);
  check_launch("adamw");
}

void sum_squares(cudaStream_t stream, float* out, Floats x, int64_t n, void* scratch) {
  const unsigned blocks = std::min<unsigned>(blocks_for(n), kSumBlocks);
  double* partial = static_cast<double*>(scratch);
  sum_squares_partials<<<blocks, kThreads, 0, stream>>>(partial, x, n);
  sum_squares_total<<<1, kThreads, 0, stream>>>(out, partial, blocks);
  check_launch("sum_squares");
}

}  // namespace mh::kernels::gpu
