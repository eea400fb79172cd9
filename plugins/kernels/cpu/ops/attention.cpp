// Memory-efficient attention (abi.h MH_AttentionArgs): FlashAttention-2's
// tiling on the CPU. A task is one query block of one (group, head); it
// walks the visible key blocks, each score tile a BLAS product of two tiles
// that stay in L1/L2, with an online softmax in between. Nothing of size
// Sq x Sk is ever stored; backward recomputes each probability tile from q,
// k and the saved lse.
#include "ops/fast_math.hpp"
#include "ops/ops.hpp"
#include "bf16.hpp"

#include <cblas.h>
#include <megahost/rng.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace mh::kernels::cpu {
namespace {

// Query rows and key columns of a tile: 64 x 64 f32 scores (16 KiB) beside
// tiles of q, k, v and their gradients of 64 x D.
constexpr int64_t kBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Element (r, c) of a strided [rows, D] operand as f32.
float load(const AttentionOperand& t, int64_t r, int64_t c) {
  const int64_t at = r * t.ld + c;
  return t.dtype == MH_BF16 ? from_bf16(static_cast<const uint16_t*>(t.data)[at]) : static_cast<const float*>(t.data)[at];
}

// tile[n, D] = rows first .. first + n of the operand, widened to f32.
void load_tile(float* tile, const AttentionOperand& t, int64_t first, int64_t n, int64_t D) {
  for (int64_t r = 0; r < n; ++r)
    if (t.dtype == MH_BF16) {
      const uint16_t* row = static_cast<const uint16_t*>(t.data) + (first + r) * t.ld;
      for (int64_t c = 0; c < D; ++c) tile[r * D + c] = from_bf16(row[c]);
    } else {
      std::copy_n(static_cast<const float*>(t.data) + (first + r) * t.ld, D, tile + r * D);
    }
}

// Rows first .. first + n of the operand (+)= tile[n, D], rounded once to its dtype.
void store_tile(const AttentionOperand& t, const float* tile, int64_t first, int64_t n, int64_t D, bool accumulate) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < D; ++c) {
      const float value = tile[r * D + c] + (accumulate ? load(t, first + r, c) : 0.0f);
      const int64_t at = (first + r) * t.ld + c;
      if (t.dtype == MH_BF16)
        static_cast<uint16_t*>(t.data)[at] = to_bf16(value);
      else
        static_cast<float*>(t.data)[at] = value;
    }
}

// c[m, n] (= or +=) alpha * a[m, k] b[n, k]^T (trans_b) or a[m, k] b[k, n],
// over contiguous tiles; trans_a reads a as [k, m].
void tile_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(trans_a ? m : k), b, int(trans_b ? k : n), beta, c, int(n));
}

// Which columns a query row sees and how its dropout draws are numbered.
struct RowMask {
  const AttentionProblem& p;
  const int32_t* starts;  // this group's sample row of starts, or NULL

  // Row i sees columns [first, last), empty when first >= last.
  int64_t first(int64_t i) const { return starts ? std::max<int64_t>(0, starts[i]) : 0; }
  int64_t last(int64_t i) const { return std::clamp<int64_t>(p.q_offset + i + 1, 0, p.sk); }
  // The dropout multiplier of (row i, column j) of head (g, h): 0 or 1 / (1 - p).
  float keep(int64_t g, int64_t h, int64_t i, int64_t j) const {
    const uint64_t e = uint64_t(((g * p.heads + h) * p.rows + p.row0 + i) * p.cols + p.col0 + j);
    const uint64_t counter = p.rng.base + (e / p.rng.row_len) * p.rng.row_stride + e % p.rng.row_len;
    return rng::uniform(p.rng.seed, counter) >= p.dropout ? 1.0f / (1.0f - p.dropout) : 0.0f;
  }
};

// The score tile of query rows [q0, q0 + nq) against key columns [k0, k0 + nk):
// s[i, j] = scale * q_i . k_j, or -inf where row i does not see column j.
void score_tile(float* s, const float* q, const float* k, int64_t q0, int64_t nq, int64_t k0, int64_t nk,
                const RowMask& mask) {
  tile_gemm(false, true, nq, nk, mask.p.dim, mask.p.scale, q, k, 0.0f, s);
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t lo = std::clamp<int64_t>(mask.first(q0 + i) - k0, 0, nk);
    const int64_t hi = std::clamp<int64_t>(mask.last(q0 + i) - k0, lo, nk);
    std::fill(s + i * nk, s + i * nk + lo, kNegInf);
    std::fill(s + i * nk + hi, s + (i + 1) * nk, kNegInf);
  }
}

// The key blocks query rows [q0, q0 + nq) see any of: [first, last) columns.
std::pair<int64_t, int64_t> visible_columns(const RowMask& mask, int64_t q0, int64_t nq) {
  int64_t first = mask.p.sk, last = 0;
  for (int64_t i = q0; i < q0 + nq; ++i)
    if (mask.first(i) < mask.last(i)) {
      first = std::min(first, mask.first(i));
      last = std::max(last, mask.last(i));
    }
  return {first, last};
}

struct Tiles {
  std::vector<float> q, k, v, s, o, dout, dq, dk, dv, dp;
  explicit Tiles(int64_t D)
      : q(kBlock * D), k(kBlock * D), v(kBlock * D), s(kBlock * kBlock), o(kBlock * D), dout(kBlock * D),
        dq(kBlock * D), dk(kBlock * D), dv(kBlock * D), dp(kBlock * kBlock) {}
};

const int32_t* sample_starts(const AttentionProblem& p, int64_t g) {
  return p.starts ? p.starts + (g / (p.groups / p.starts_rows)) * p.sq : nullptr;
}

// One query block of head (g, h): out and lse of its rows.
void forward_block(const AttentionProblem& p, Tiles& t, int64_t g, int64_t h, int64_t q0) {
  const RowMask mask{p, sample_starts(p, g)};
  const int64_t nq = std::min(kBlock, p.sq - q0), D = p.dim;
  float m[kBlock], l[kBlock];
  float* lse = p.lse + ((g * p.heads + h) * p.sq + q0);
  if (p.accumulate) {
    // The earlier key blocks' result is the online softmax's state with
    // max lse and normaliser 1: out already divided by it.
    for (int64_t i = 0; i < nq; ++i) {
      m[i] = lse[i];
      l[i] = lse[i] == kNegInf ? 0.0f : 1.0f;
    }
    load_tile(t.o.data(), p.out(g, h), q0, nq, D);
  } else {
    std::fill_n(m, nq, kNegInf);
    std::fill_n(l, nq, 0.0f);
    std::fill_n(t.o.data(), nq * D, 0.0f);
  }
  load_tile(t.q.data(), p.q(g, h), q0, nq, D);
  const auto [first, last] = visible_columns(mask, q0, nq);
  for (int64_t k0 = first / kBlock * kBlock; k0 < last; k0 += kBlock) {
    const int64_t nk = std::min(kBlock, p.sk - k0);
    load_tile(t.k.data(), p.k(g), k0, nk, D);
    load_tile(t.v.data(), p.v(g), k0, nk, D);
    score_tile(t.s.data(), t.q.data(), t.k.data(), q0, nq, k0, nk, mask);
    for (int64_t i = 0; i < nq; ++i) {
      float* s = t.s.data() + i * nk;
      float max = m[i];
      for (int64_t j = 0; j < nk; ++j) max = std::max(max, s[j]);
      if (max == kNegInf) {  // nothing visible yet: the row's tile adds nothing
        std::fill_n(s, nk, 0.0f);
        continue;
      }
      const float rescale = m[i] == kNegInf ? 0.0f : fast_exp(m[i] - max);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < nk; ++j) {
        s[j] = s[j] == kNegInf ? 0.0f : fast_exp(s[j] - max);
        sum += s[j];
      }
      // The normaliser sums the probabilities before dropout; the output
      // takes them after, as dropout(softmax(.)) v does.
      if (p.dropout > 0.0f)
        for (int64_t j = 0; j < nk; ++j)
          if (s[j] != 0.0f) s[j] *= mask.keep(g, h, q0 + i, k0 + j);
      l[i] = l[i] * rescale + sum;
      m[i] = max;
      for (int64_t c = 0; c < D; ++c) t.o[i * D + c] *= rescale;
    }
    tile_gemm(false, false, nq, D, nk, 1.0f, t.s.data(), t.v.data(), 1.0f, t.o.data());
  }
  for (int64_t i = 0; i < nq; ++i) {
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int64_t c = 0; c < D; ++c) t.o[i * D + c] *= inv;
    lse[i] = l[i] > 0.0f ? m[i] + std::log(l[i]) : kNegInf;
  }
  store_tile(p.out(g, h), t.o.data(), q0, nq, D, false);
}

// For the tile of rows [q0, q0 + nq) x columns [k0, k0 + nk) of head (g, h),
// with t.q, t.k, t.v, t.dout and the rows' lse and delta = rowsum(dout * out)
// loaded: t.s = the dropped probabilities P * Z, t.dp = dS, the scores'
// gradient before the scale (dS = P * (Z * dout v^T - delta)).
void gradient_tile(const AttentionProblem& p, Tiles& t, const RowMask& mask, int64_t g, int64_t h, int64_t q0,
                   int64_t nq, int64_t k0, int64_t nk, const float* lse, const float* delta) {
  score_tile(t.s.data(), t.q.data(), t.k.data(), q0, nq, k0, nk, mask);
  tile_gemm(false, true, nq, nk, p.dim, 1.0f, t.dout.data(), t.v.data(), 0.0f, t.dp.data());
  for (int64_t i = 0; i < nq; ++i) {
    float* s = t.s.data() + i * nk;
    float* dp = t.dp.data() + i * nk;
    for (int64_t j = 0; j < nk; ++j) {
      const float prob = s[j] == kNegInf ? 0.0f : fast_exp(s[j] - lse[i]);
      const float z = prob != 0.0f && p.dropout > 0.0f ? mask.keep(g, h, q0 + i, k0 + j) : 1.0f;
      s[j] = prob * z;
      dp[j] = prob * (z * dp[j] - delta[i]);
    }
  }
}

// delta[g, h, i] = sum_c dout[i, c] * out[i, c], the row sums dS needs.
std::vector<float> row_deltas(const AttentionProblem& p, int threads) {
  std::vector<float> delta(size_t(p.groups * p.heads * p.sq));
#pragma omp parallel for collapse(2) num_threads(team(threads, p.groups * p.heads * p.sq * p.dim)) schedule(static)
  for (int64_t gh = 0; gh < p.groups * p.heads; ++gh)
    for (int64_t i = 0; i < p.sq; ++i) {
      const AttentionOperand dout = p.dout(gh / p.heads, gh % p.heads), out = p.out(gh / p.heads, gh % p.heads);
      float sum = 0.0f;
      for (int64_t c = 0; c < p.dim; ++c) sum += load(dout, i, c) * load(out, i, c);
      delta[size_t(gh * p.sq + i)] = sum;
    }
  return delta;
}

// dk and dv of key block k0 of group g, summed over its heads and every query block.
void key_block_grads(const AttentionProblem& p, Tiles& t, const float* delta, int64_t g, int64_t k0) {
  const int64_t nk = std::min(kBlock, p.sk - k0), D = p.dim;
  const RowMask mask{p, sample_starts(p, g)};
  std::fill_n(t.dk.data(), nk * D, 0.0f);
  std::fill_n(t.dv.data(), nk * D, 0.0f);
  load_tile(t.k.data(), p.k(g), k0, nk, D);
  load_tile(t.v.data(), p.v(g), k0, nk, D);
  for (int64_t h = 0; h < p.heads; ++h)
    for (int64_t q0 = 0; q0 < p.sq; q0 += kBlock) {
      const int64_t nq = std::min(kBlock, p.sq - q0);
      const auto [first, last] = visible_columns(mask, q0, nq);
      if (first >= k0 + nk || last <= k0) continue;
      load_tile(t.q.data(), p.q(g, h), q0, nq, D);
      load_tile(t.dout.data(), p.dout(g, h), q0, nq, D);
      const int64_t row = (g * p.heads + h) * p.sq + q0;
      gradient_tile(p, t, mask, g, h, q0, nq, k0, nk, p.lse + row, delta + row);
      tile_gemm(true, false, nk, D, nq, 1.0f, t.s.data(), t.dout.data(), 1.0f, t.dv.data());    // dV += (PZ)^T dO
      tile_gemm(true, false, nk, D, nq, p.scale, t.dp.data(), t.q.data(), 1.0f, t.dk.data());  // dK += scale dS^T Q
    }
  store_tile(p.dk(g), t.dk.data(), k0, nk, D, true);
  store_tile(p.dv(g), t.dv.data(), k0, nk, D, true);
}

// dq of one query block of head (g, h), over the key blocks it sees.
void query_block_grads(const AttentionProblem& p, Tiles& t, const float* delta, int64_t g, int64_t h, int64_t q0) {
  const int64_t nq = std::min(kBlock, p.sq - q0), D = p.dim;
  const RowMask mask{p, sample_starts(p, g)};
  const int64_t row = (g * p.heads + h) * p.sq + q0;
  std::fill_n(t.dq.data(), nq * D, 0.0f);
  load_tile(t.q.data(), p.q(g, h), q0, nq, D);
  load_tile(t.dout.data(), p.dout(g, h), q0, nq, D);
  const auto [first, last] = visible_columns(mask, q0, nq);
  for (int64_t k0 = first / kBlock * kBlock; k0 < last; k0 += kBlock) {
    const int64_t nk = std::min(kBlock, p.sk - k0);
    load_tile(t.k.data(), p.k(g), k0, nk, D);
    load_tile(t.v.data(), p.v(g), k0, nk, D);
    gradient_tile(p, t, mask, g, h, q0, nq, k0, nk, p.lse + row, delta + row);
    tile_gemm(false, false, nq, D, nk, p.scale, t.dp.data(), t.k.data(), 1.0f, t.dq.data());  // dQ += scale dS K
  }
  store_tile(p.dq(g, h), t.dq.data(), q0, nq, D, true);
}

}  // namespace

void attention_forward(const AttentionProblem& p, int threads) {
  const int64_t blocks = (p.sq + kBlock - 1) / kBlock, tasks = p.groups * p.heads * blocks;
#pragma omp parallel num_threads(team(threads, p.groups * p.heads * p.sq * p.sk * p.dim))
  {
    Tiles t(p.dim);
    // Causal blocks differ in work (the last sees every key), so dynamic.
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task)
      forward_block(p, t, task / blocks / p.heads, task / blocks % p.heads, task % blocks * kBlock);
  }
}

// Two passes, so that no two tasks write the same gradient rows: dk and dv
// by key block (summing over heads and query blocks), then dq by query
// block. Each recomputes the probability tiles it needs.
void attention_backward(const AttentionProblem& p, int threads) {
  const std::vector<float> delta = row_deltas(p, threads);
  const int nt = team(threads, p.groups * p.heads * p.sq * p.sk * p.dim);
  const int64_t key_blocks = (p.sk + kBlock - 1) / kBlock, query_blocks = (p.sq + kBlock - 1) / kBlock;
#pragma omp parallel num_threads(nt)
  {
    Tiles t(p.dim);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.groups * key_blocks; ++task)
      key_block_grads(p, t, delta.data(), task / key_blocks, task % key_blocks * kBlock);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.groups * p.heads * query_blocks; ++task)
      query_block_grads(p, t, delta.data(), task / query_blocks / p.heads, task / query_blocks % p.heads,
                        task % query_blocks * kBlock);
  }
}

}  // namespace mh::kernels::cpu
