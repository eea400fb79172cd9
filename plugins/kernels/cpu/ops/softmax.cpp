#include "ops/fast_math.hpp"
#include "ops/ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mh::kernels::cpu {
namespace {

// Position p's first visible column; a start past p (a caller's bad table)
// is taken as p, so no write leaves the row.
int64_t first_column(const int32_t* starts, int64_t p) {
  return starts ? std::clamp<int64_t>(starts[p], 0, p) : 0;
}

}  // namespace

// Row i of each group's (Q, T) scores is position p = T - Q - later + i and
// sees columns first..p (first = starts[p], or 0); the rest is masked out and
// comes out as 0.
void softmax_forward(float* out, const float* x, float scale, int64_t G, int64_t Q, int64_t T, int64_t later,
                     const int32_t* starts, int threads) {
#pragma omp parallel for num_threads(team(threads, G * Q * T)) schedule(static)
  for (int64_t row = 0; row < G * Q; ++row) {
    const int64_t p = T - Q - later + row % Q, seen = p + 1, first = first_column(starts, p);
    const float* xr = x + row * T;
    float* o = out + row * T;
#pragma omp simd
    for (int64_t j = 0; j < first; ++j) o[j] = 0.0f;
    float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t j = first; j < seen; ++j) max = scale * xr[j] > max ? scale * xr[j] : max;  // see xent_max
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = first; j < seen; ++j) {
      o[j] = fast_exp(scale * xr[j] - max);
      sum += o[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = first; j < seen; ++j) o[j] *= inv;
#pragma omp simd
    for (int64_t j = seen; j < T; ++j) o[j] = 0.0f;
  }
}

// dx = out * (dout - sum(dout * out)) * scale over the visible columns; the
// masked ones get 0 whatever dout holds there.
void softmax_backward(float* dx, const float* out, const float* dout, float scale, int64_t G, int64_t Q, int64_t T,
                      int64_t later, const int32_t* starts, int threads) {
#pragma omp parallel for num_threads(team(threads, G * Q * T)) schedule(static)
  for (int64_t row = 0; row < G * Q; ++row) {
    const int64_t p = T - Q - later + row % Q, seen = p + 1, first = first_column(starts, p);
    const float* o = out + row * T;
    const float* g = dout + row * T;
    float* d = dx + row * T;
#pragma omp simd
    for (int64_t j = 0; j < first; ++j) d[j] = 0.0f;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = first; j < seen; ++j) dot += g[j] * o[j];
#pragma omp simd
    for (int64_t j = first; j < seen; ++j) d[j] = o[j] * (g[j] - dot) * scale;
#pragma omp simd
    for (int64_t j = seen; j < T; ++j) d[j] = 0.0f;
  }
}

}  // namespace mh::kernels::cpu
