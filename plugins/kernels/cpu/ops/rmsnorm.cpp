// RMSNorm (Llama): layernorm without the mean and the bias.
#include "ops/ops.hpp"

#include <omp.h>

#include <cmath>
#include <vector>

namespace mh::kernels::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C, float eps,
                     int threads) {
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* xn = x + n * C;
    float* on = out + n * C;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t c = 0; c < C; ++c) squares += xn[c] * xn[c];
    const float s = 1.0f / std::sqrt(squares / static_cast<float>(C) + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) on[c] = xn[c] * s * weight[c];
    rstd[n] = s;
  }
}

void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* weight,
                      const float* rstd, int64_t N, int64_t C, int threads) {
  const int nt = team(threads, N * C);
  // dweight sums over rows: each thread sums its rows into its own slice of
  // `partial` ([nt, C]), and the slices are added at the end.
  std::vector<float> partial(static_cast<size_t>(nt) * C, 0.0f);
#pragma omp parallel num_threads(nt)
  {
    float* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xn = x + n * C;
      const float* gn = dout + n * C;
      const float s = rstd[n];
      // norm = x * rstd; dx = (dout * weight - norm * mean(dout * weight * norm)) * rstd
      float dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_norm_mean)
      for (int64_t c = 0; c < C; ++c) dnorm_norm_mean += gn[c] * weight[c] * xn[c] * s;
      dnorm_norm_mean /= static_cast<float>(C);
      float* dxn = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float norm = xn[c] * s;
        dxn[c] += (gn[c] * weight[c] - norm * dnorm_norm_mean) * s;
        dw[c] += gn[c] * norm;
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const float* dw = partial.data() + static_cast<size_t>(t) * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dweight[c] += dw[c];
  }
}

}  // namespace mh::kernels::cpu
