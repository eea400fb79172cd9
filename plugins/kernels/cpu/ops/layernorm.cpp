#include "ops/ops.hpp"

#include <omp.h>

#include <cmath>
#include <vector>

namespace mh::kernels::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps, int threads) {
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* xn = x + n * C;
    float* on = out + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += xn[c];
    const float m = sum / static_cast<float>(C);
    // Two passes: the variance of centred values does not cancel like E[x^2] - m^2.
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (xn[c] - m) * (xn[c] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) on[c] = (xn[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        int threads) {
  const int nt = team(threads, N * C);
  // dweight and dbias sum over rows: each thread sums its rows into its own
  // slice of `partial` ([nt, 2, C]), and the slices are added at the end.
  std::vector<float> partial(static_cast<size_t>(nt) * 2 * C, 0.0f);
#pragma omp parallel num_threads(nt)
  {
    float* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C;
    float* db = dw + C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xn = x + n * C;
      const float* gn = dout + n * C;
      const float m = mean[n], s = rstd[n];
      // dnorm = dout * weight; dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
      for (int64_t c = 0; c < C; ++c) {
        const float dnorm = gn[c] * weight[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (xn[c] - m) * s;
      }
      dnorm_mean /= static_cast<float>(C);
      dnorm_norm_mean /= static_cast<float>(C);
      float* dxn = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float norm = (xn[c] - m) * s;
        dxn[c] += (gn[c] * weight[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
        dw[c] += gn[c] * norm;
        db[c] += gn[c];
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const float* dw = partial.data() + static_cast<size_t>(t) * 2 * C;
    const float* db = dw + C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      dweight[c] += dw[c];
      dbias[c] += db[c];
    }
  }
}

}  // namespace mh::kernels::cpu
