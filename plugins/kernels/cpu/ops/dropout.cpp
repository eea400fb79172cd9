#include "ops/ops.hpp"

#include <megahost/rng.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>

namespace mh::kernels::cpu {

// Element (r, j) of the [n / row_len, row_len] view draws counter
// base + r * row_stride + j, so a shard of a larger tensor draws what the
// whole tensor would at the same place, on every layout and on recompute.
// An element is kept when its draw is >= p, so p = 0 keeps everything.
void dropout_forward(float* out, uint8_t* mask, const float* x, const float* residual, float p,
                     const MH_RngSpan& rng, int64_t first, int64_t n, int threads) {
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
  const int64_t len = static_cast<int64_t>(rng.row_len);
  const float keep_scale = 1.0f / (1.0f - p);
  // The team splits the elements, not the rows: the engine's spans are
  // often one row (a rank's whole hidden block, or one sample's heads).
  // Each thread walks its range in pieces of one row, whose draws are
  // consecutive counters, one addition apart (docs/kernels-cpu.md).
#pragma omp parallel num_threads(team(threads, n))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t hi = n * (t + 1) / nt;
    for (int64_t i = n * t / nt; i < hi;) {
      const int64_t row = (first + i) / len, j = first + i - row * len, count = std::min(hi - i, len - j);
      const uint64_t first = rng.base + static_cast<uint64_t>(row) * rng.row_stride + static_cast<uint64_t>(j);
      for (int64_t k = 0; k < count; ++k) {
        const bool keep = rng::uniform(rng.seed, first + static_cast<uint64_t>(k)) >= p;
        mask[i + k] = keep ? 1 : 0;
        // One rounding (fma) whether this element falls in the vectorised
        // body or the scalar tail, so any team size gives the same bits.
        out[i + k] = std::fma(x[i + k], keep ? keep_scale : 0.0f, residual != nullptr ? residual[i + k] : 0.0f);
      }
      i += count;
    }
  }
}

void dropout_backward(float* dx, const float* dout, const uint8_t* mask, float p, int64_t n, int threads) {
  const float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * (mask[i] != 0 ? keep_scale : 0.0f);
}

}  // namespace mh::kernels::cpu
