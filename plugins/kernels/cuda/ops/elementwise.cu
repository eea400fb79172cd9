// Elementwise ops over n contiguous elements (MH_ElementwiseArgs).
#include "ops/device.cuh"

#include <megahost/rng.hpp>

namespace mh::kernels::gpu {
namespace {

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ float gelu(float v) { return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v))); }

__device__ float gelu_grad(float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
  const float dtanh_arg = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dtanh_arg;
}

__device__ float apply(int32_t op, Floats x, Floats y, float alpha, int64_t i) {
  switch (op) {
    case MH_GELU: return gelu(load(x, i));
    case MH_GELU_BWD: return load(y, i) * gelu_grad(load(x, i));
    case MH_SCALE: return alpha * load(x, i);
    case MH_COPY: return load(x, i);
    case MH_FILL: return alpha;
    case MH_ADD: return load(x, i) + load(y, i);
    default: return alpha * load(x, i) + load(y, i);  // MH_AXPY
  }
}

__global__ void elementwise_kernel(int32_t op, Floats out, Floats x, Floats y, float alpha, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(out, i, apply(op, x, y, alpha, i));
}

__global__ void scale_matrices_kernel(Floats c, float beta, int64_t batch, int64_t rows, int64_t cols, int64_t step,
                                      int64_t ld) {
  for (int64_t i = first_index(); i < batch * rows * cols; i += grid_stride()) {
    const int64_t matrix = i / (rows * cols), row = i / cols % rows, col = i % cols;
    const int64_t at = matrix * step + row * ld + col;
    store(c, at, beta == 0.0f ? 0.0f : beta * load(c, at));
  }
}

__global__ void fill_uniform_kernel(Floats out, int64_t n, uint64_t seed) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(out, i, rng::uniform(seed, uint64_t(i)) - 0.5f);
}

}  // namespace

void elementwise(cudaStream_t stream, int32_t op, Floats out, Floats x, Floats y, float alpha, int64_t n) {
  if (op == MH_COPY && out.bf16 == x.bf16) {
    // Same dtype: a plain copy, nothing to convert.
    if (out.data != x.data)
      cudaMemcpyAsync(out.data, x.data, uint64_t(n) * (out.bf16 ? 2 : 4), cudaMemcpyDeviceToDevice, stream);
  } else {
    elementwise_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, out, x, y, alpha, n);
  }
  check_launch("elementwise");
}

void scale_matrices(cudaStream_t stream, Floats c, float beta, int64_t batch, int64_t rows, int64_t cols, int64_t step,
                    int64_t ld) {
  scale_matrices_kernel<<<blocks_for(batch * rows * cols), kThreads, 0, stream>>>(c, beta, batch, rows, cols, step, ld);
  check_launch("gemm");
}

void fill_uniform(cudaStream_t stream, Floats out, int64_t n, uint64_t seed) {
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, n, seed);
  check_launch("fill_uniform");
}

}  // namespace mh::kernels::gpu
