#include "ops/ops.hpp"

#include <megahost/rng.hpp>

namespace mh::kernels::cpu {

// Element (r, j) of the [n / row_len, row_len] view draws counter
// base + r * row_stride + j, so a shard of a larger tensor draws what the
// whole tensor would at the same place, on every layout and on recompute.
// An element is kept when its draw is >= p, so p = 0 keeps everything.
void dropout_forward(float* out, uint8_t* mask, const float* x, const float* residual, float p,
                     const MH_RngSpan& rng, int64_t n, int threads) {
  if (p == 0.0f) {
    // Every draw is >= 0, so everything is kept: the same mask and output
    // without the draws (Philox is ~11 ns an element, unvectorised). The
    // engine calls dropout with p = 0 when dropout is off and for evaluation.
#pragma omp parallel num_threads(team(threads, n))
    {
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) mask[i] = 1;
      if (residual != nullptr) {
#pragma omp for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] + residual[i];
      } else {
#pragma omp for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] + 0.0f;  // as x * 1 + 0 below: -0 comes out as +0
      }
    }
    return;
  }
  const int64_t len = static_cast<int64_t>(rng.row_len), rows = n / len;
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for num_threads(team(threads, n)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t first = rng.base + static_cast<uint64_t>(r) * rng.row_stride;
    for (int64_t i = r * len, j = 0; j < len; ++i, ++j) {
      const bool keep = rng::uniform(rng.seed, first + j) >= p;
      mask[i] = keep ? 1 : 0;
      out[i] = x[i] * (keep ? keep_scale : 0.0f) + (residual != nullptr ? residual[i] : 0.0f);
    }
  }
}

void dropout_backward(float* dx, const float* dout, const uint8_t* mask, float p, int64_t n, int threads) {
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * (mask[i] != 0 ? keep_scale : 0.0f);
}

}  // namespace mh::kernels::cpu
