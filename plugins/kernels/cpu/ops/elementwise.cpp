#include "ops/fast_math.hpp"
#include "ops/ops.hpp"

namespace mh::kernels::cpu {
namespace {

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

}  // namespace

void gelu_forward(float* out, const float* x, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + fast_tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

void gelu_backward(float* dx, const float* x, const float* dout, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = fast_tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float dtanh_arg = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    const float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dtanh_arg;
    dx[i] = dout[i] * grad;
  }
}

void scale(float* out, const float* x, float alpha, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}

void axpy(float* out, float alpha, const float* x, const float* y, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];
}

void fill(float* out, float value, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

}  // namespace mh::kernels::cpu
