// SwiGLU (Llama's MLP activation): silu(gate) * up over a row holding the
// gate, then the up projection.
#include "ops/fast_math.hpp"
#include "ops/ops.hpp"

namespace mh::kernels::cpu {
namespace {

inline float sigmoid(float g) { return 1.0f / (1.0f + fast_exp(-g)); }

}  // namespace

void swiglu_forward(float* out, const float* x, int64_t ldx, int64_t N, int64_t F, int threads) {
#pragma omp parallel for num_threads(team(threads, N * F)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = x + n * ldx;
    const float* up = gate + F;
    float* on = out + n * F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) on[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
}

void swiglu_backward(float* dx, int64_t lddx, const float* x, int64_t ldx, const float* dout, int64_t N, int64_t F,
                     int threads) {
#pragma omp parallel for num_threads(team(threads, N * F)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = x + n * ldx;
    const float* up = gate + F;
    const float* gn = dout + n * F;
    float* dgate = dx + n * lddx;
    float* dup = dgate + F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      const float g = gate[j], s = sigmoid(g);
      // silu'(g) = s + g s (1 - s)
      dgate[j] = gn[j] * up[j] * (s + g * s * (1.0f - s));
      dup[j] = gn[j] * g * s;
    }
  }
}

}  // namespace mh::kernels::cpu
