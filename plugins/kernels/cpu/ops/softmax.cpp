#include "ops/fast_math.hpp"
#include "ops/ops.hpp"

#include <cmath>
#include <limits>

namespace mh::kernels::cpu {

// Row i of each group's (S, S) scores sees columns 0..i; the rest is masked
// out and comes out as 0.
void softmax_forward(float* out, const float* x, float scale, int64_t G, int64_t S, int threads) {
#pragma omp parallel for num_threads(team(threads, G * S * S)) schedule(static)
  for (int64_t row = 0; row < G * S; ++row) {
    const int64_t seen = row % S + 1;
    const float* xr = x + row * S;
    float* o = out + row * S;
    float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < seen; ++j) max = scale * xr[j] > max ? scale * xr[j] : max;  // see xent_max
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < seen; ++j) {
      o[j] = fast_exp(scale * xr[j] - max);
      sum += o[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < seen; ++j) o[j] *= inv;
#pragma omp simd
    for (int64_t j = seen; j < S; ++j) o[j] = 0.0f;
  }
}

// dx = out * (dout - sum(dout * out)) * scale over the visible columns; the
// masked ones get 0 whatever dout holds there.
void softmax_backward(float* dx, const float* out, const float* dout, float scale, int64_t G, int64_t S,
                      int threads) {
#pragma omp parallel for num_threads(team(threads, G * S * S)) schedule(static)
  for (int64_t row = 0; row < G * S; ++row) {
    const int64_t seen = row % S + 1;
    const float* o = out + row * S;
    const float* g = dout + row * S;
    float* d = dx + row * S;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < seen; ++j) dot += g[j] * o[j];
#pragma omp simd
    for (int64_t j = 0; j < seen; ++j) d[j] = o[j] * (g[j] - dot) * scale;
#pragma omp simd
    for (int64_t j = seen; j < S; ++j) d[j] = 0.0f;
  }
}

}  // namespace mh::kernels::cpu
