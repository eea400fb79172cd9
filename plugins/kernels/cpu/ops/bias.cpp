#include "ops/ops.hpp"

#include <algorithm>

namespace mh::kernels::cpu {
namespace {

// Column block of bias_backward: wide enough for whole vectors, narrow enough
// that C = 768 still gives every thread blocks of its own.
constexpr int64_t kColumnBlock = 64;

}  // namespace

void bias_forward(float* out, const float* x, const float* bias, int64_t N, int64_t C, int threads) {
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] + bias[c];
  }
}

void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C, int threads) {
  // Threads own column blocks, so no two threads add to the same dbias[c].
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    for (int64_t n = 0; n < N; ++n) {
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dbias[c] += dout[n * C + c];
    }
  }
}

}  // namespace mh::kernels::cpu
