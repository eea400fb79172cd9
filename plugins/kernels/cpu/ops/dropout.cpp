#include <immintrin.h>
#include <megahost/rng.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "bf16_gemm.hpp"
#include "ops/ops.hpp"

namespace mh::kernels::cpu {
namespace {

// Draws a dropout takes at once, per thread (on its stack).
constexpr int64_t kDraws = 256;

// 32 x 32 -> 64-bit products of each lane of v by m: the high and low words.
__attribute__((target("avx512f"))) void mul_hi_lo(__m512i v, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(v, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(v, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mullo_epi32(v, m);
}

// rng::uniform(seed, first + k) for the whole blocks of sixteen k < n, the
// counters of a block at once in the lanes of AVX-512: Philox is integer
// arithmetic, so the bits are the scalar's (dropout ran 4.7x faster than on
// scalar draws, docs/kernels-cpu.md). Returns how many it drew.
__attribute__((target("avx512f"))) int64_t uniforms_avx512(uint64_t seed, uint64_t first, int64_t n, float* u) {
  const __m512i m0 = _mm512_set1_epi32(int32_t(rng::kPhiloxM0)), m1 = _mm512_set1_epi32(int32_t(rng::kPhiloxM1));
  const __m512i steps = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512i c0 = _mm512_add_epi64(_mm512_set1_epi64(int64_t(first + uint64_t(k))), steps);
    const __m512i c1 = _mm512_add_epi64(c0, _mm512_set1_epi64(8));
    __m512i v0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(c0)), _mm512_cvtepi64_epi32(c1), 1);
    __m512i v1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(c0, 32))),
                                    _mm512_cvtepi64_epi32(_mm512_srli_epi64(c1, 32)), 1);
    __m512i v2 = _mm512_setzero_si512(), v3 = _mm512_setzero_si512();
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += rng::kPhiloxW0;
        k1 += rng::kPhiloxW1;
      }
      __m512i hi0, lo0, hi1, lo1;
      mul_hi_lo(v0, m0, hi0, lo0);
      mul_hi_lo(v2, m1, hi1, lo1);
      v0 = _mm512_xor_si512(_mm512_xor_si512(hi1, v1), _mm512_set1_epi32(int32_t(k0)));
      v1 = lo1;
      v2 = _mm512_xor_si512(_mm512_xor_si512(hi0, v3), _mm512_set1_epi32(int32_t(k1)));
      v3 = lo0;
    }
    _mm512_storeu_ps(u + k, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v0, 8)), _mm512_set1_ps(1.0f / 16777216.0f)));
  }
  return k;
}

const bool kHasAvx512 = avx512_allowed();

}  // namespace

void uniforms(uint64_t seed, uint64_t first, int64_t n, float* u) {
  for (int64_t k = kHasAvx512 ? uniforms_avx512(seed, first, n, u) : 0; k < n; ++k)
    u[k] = rng::uniform(seed, first + uint64_t(k));
}

// Element (r, j) of the [n / row_len, row_len] view draws counter
// base + r * row_stride + j, so a shard of a larger tensor draws what the
// whole tensor would at the same place, on every layout and on recompute.
// An element is kept when its draw is >= p, so p = 0 keeps everything.
void dropout_forward(float* out, uint8_t* mask, const float* x, const float* residual, float p,
                     const MH_RngSpan& rng, int64_t first, int64_t n, int threads) {
  if (p == 0.0f) {
    // Every draw is >= 0, so everything is kept: the same mask and output
    // without the draws (Philox is ~10 ns an element, ~2 in AVX-512 lanes). The
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
      float draws[kDraws];
      for (int64_t block = 0; block < count; block += kDraws) {
        const int64_t m = std::min(kDraws, count - block), at = i + block;
        uniforms(rng.seed, first + static_cast<uint64_t>(block), m, draws);
#pragma omp simd
        for (int64_t k = 0; k < m; ++k) {
          const bool keep = draws[k] >= p;
          mask[at + k] = keep ? 1 : 0;
          // One rounding (fma) whether this element falls in the vectorised
          // body or the scalar tail, so any team size gives the same bits.
          out[at + k] = std::fma(x[at + k], keep ? keep_scale : 0.0f, residual != nullptr ? residual[at + k] : 0.0f);
        }
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
