// Memory-efficient attention (abi.h MH_AttentionArgs), the straightforward
// way: one warp per query row walks the keys with an online softmax, its
// lanes splitting the head dimension (D <= 32 * kLaneElements), so nothing
// of size Sq x Sk is stored. The backward recomputes each probability from
// q, k and lse: one warp per query row sums dq, one warp per key row sums
// dk and dv over the heads and rows that see it, so no two warps write one
// row and the sums need no atomics. Dropout draws with mh::rng exactly as
// the dropout op does.
#include "ops/device.cuh"

#include <megahost/rng.hpp>

namespace mh::kernels::gpu {
namespace {

__device__ inline float load_at(const AttentionOperand& t, int64_t r, int64_t c) {
  return t.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(t.data)[r * t.ld + c])
                : static_cast<const float*>(t.data)[r * t.ld + c];
}

__device__ inline void store_at(const AttentionOperand& t, int64_t r, int64_t c, float value) {
  if (t.bf16) static_cast<__nv_bfloat16*>(t.data)[r * t.ld + c] = __float2bfloat16_rn(value);
  else static_cast<float*>(t.data)[r * t.ld + c] = value;
}

__device__ inline AttentionOperand head(const AttentionView& t, int64_t g, int64_t h) {
  const int64_t at = g * t.group + h * t.head;
  return {static_cast<char*>(t.data) + at * (t.bf16 ? 2 : 4), t.bf16, t.row};
}

// Row i's visible columns [first, last).
__device__ inline int64_t first_column(const AttentionShape& s, int64_t g, int64_t i) {
  return s.starts ? max(int64_t{0}, int64_t(s.starts[(g / s.per_sample) * s.sq + i])) : 0;
}
__device__ inline int64_t last_column(const AttentionShape& s, int64_t i) {
  return min(s.sk, max(int64_t{0}, s.q_offset + i + 1));
}

// The dropout multiplier of (row i, column j) of head (g, h).
__device__ inline float keep(const AttentionShape& s, int64_t g, int64_t h, int64_t i, int64_t j) {
  if (s.dropout == 0.0f) return 1.0f;
  const uint64_t e = uint64_t(((g * s.heads + h) * s.rows + s.row0 + i) * s.cols + s.col0 + j);
  const uint64_t counter = s.rng.base + (e / s.rng.row_len) * s.rng.row_stride + e % s.rng.row_len;
  return rng::uniform(s.rng.seed, counter) >= s.dropout ? 1.0f / (1.0f - s.dropout) : 0.0f;
}

// This lane's share of a row's dot product with another row, summed over the warp.
__device__ inline float warp_dot(const float* mine, const AttentionOperand& t, int64_t r, int64_t D) {
  float sum = 0.0f;
  for (int e = 0; e < kLaneElements; ++e) {
    const int64_t c = threadIdx.x % kWarp + e * kWarp;
    if (c < D) sum += mine[e] * load_at(t, r, c);
  }
  return warp_reduce(sum, Sum{});
}

__device__ inline void load_lane(float* mine, const AttentionOperand& t, int64_t r, int64_t D) {
  for (int e = 0; e < kLaneElements; ++e) {
    const int64_t c = threadIdx.x % kWarp + e * kWarp;
    mine[e] = c < D ? load_at(t, r, c) : 0.0f;
  }
}

__device__ inline int64_t warp_index() { return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; }

__global__ void attention_forward_kernel(AttentionShape s, AttentionView q, AttentionView k, AttentionView v,
                                         AttentionView out, float* lse) {
  const int64_t row = warp_index();
  if (row >= s.groups * s.heads * s.sq) return;
  const int64_t g = row / s.sq / s.heads, h = row / s.sq % s.heads, i = row % s.sq;
  const AttentionOperand qh = head(q, g, h), kg = head(k, g, 0), vg = head(v, g, 0);
  float qi[kLaneElements], o[kLaneElements] = {};
  load_lane(qi, qh, i, s.dim);
  float m = -INFINITY, l = 0.0f;
  if (s.accumulate) {
    // Earlier key blocks' result: the online softmax's state with max lse
    // and normaliser 1 (out already divided by it).
    m = lse[row];
    l = m == -INFINITY ? 0.0f : 1.0f;
    load_lane(o, head(out, g, h), i, s.dim);
  }
  for (int64_t j = first_column(s, g, i); j < last_column(s, i); ++j) {
    const float x = s.scale * warp_dot(qi, kg, j, s.dim);
    const float next = fmaxf(m, x), rescale = expf(m - next), p = expf(x - next);
    l = l * rescale + p;  // the normaliser sums the probabilities before dropout
    const float pz = p * keep(s, g, h, i, j);
    for (int e = 0; e < kLaneElements; ++e) {
      const int64_t c = threadIdx.x % kWarp + e * kWarp;
      o[e] = o[e] * rescale + (c < s.dim ? pz * load_at(vg, j, c) : 0.0f);
    }
    m = next;
  }
  const AttentionOperand oh = head(out, g, h);
  for (int e = 0; e < kLaneElements; ++e) {
    const int64_t c = threadIdx.x % kWarp + e * kWarp;
    if (c < s.dim) store_at(oh, i, c, l > 0.0f ? o[e] / l : 0.0f);
  }
  if (threadIdx.x % kWarp == 0) lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// delta[row] = dout_row . out_row
__global__ void attention_delta_kernel(AttentionShape s, AttentionView dout, AttentionView out, float* delta) {
  const int64_t row = warp_index();
  if (row >= s.groups * s.heads * s.sq) return;
  const int64_t g = row / s.sq / s.heads, h = row / s.sq % s.heads, i = row % s.sq;
  float d[kLaneElements];
  load_lane(d, head(dout, g, h), i, s.dim);
  const float sum = warp_dot(d, head(out, g, h), i, s.dim);
  if (threadIdx.x % kWarp == 0) delta[row] = sum;
}

// The probability p (before dropout), its multiplier z and the score
// gradient ds = p (z dout_i . v_j - delta_i) of (row i, column j).
struct Gradient {
  float p, z, ds;
};
__device__ inline Gradient gradient(const AttentionShape& s, int64_t g, int64_t h, int64_t i, int64_t j,
                                    const float* qi, const float* di, const AttentionOperand& kg,
                                    const AttentionOperand& vg, float lse, float delta) {
  const float p = expf(s.scale * warp_dot(qi, kg, j, s.dim) - lse), z = keep(s, g, h, i, j);
  return {p, z, p * (z * warp_dot(di, vg, j, s.dim) - delta)};
}

__global__ void attention_dq_kernel(AttentionShape s, AttentionView q, AttentionView k, AttentionView v,
                                    AttentionView dout, AttentionView dq, const float* lse, const float* delta) {
  const int64_t row = warp_index();
  if (row >= s.groups * s.heads * s.sq) return;
  const int64_t g = row / s.sq / s.heads, h = row / s.sq % s.heads, i = row % s.sq;
  const AttentionOperand kg = head(k, g, 0), vg = head(v, g, 0);
  float qi[kLaneElements], di[kLaneElements], acc[kLaneElements] = {};
  load_lane(qi, head(q, g, h), i, s.dim);
  load_lane(di, head(dout, g, h), i, s.dim);
  for (int64_t j = first_column(s, g, i); j < last_column(s, i); ++j) {
    const Gradient gr = gradient(s, g, h, i, j, qi, di, kg, vg, lse[row], delta[row]);
    for (int e = 0; e < kLaneElements; ++e) {
      const int64_t c = threadIdx.x % kWarp + e * kWarp;
      if (c < s.dim) acc[e] += s.scale * gr.ds * load_at(kg, j, c);
    }
  }
  const AttentionOperand dqh = head(dq, g, h);
  for (int e = 0; e < kLaneElements; ++e) {
    const int64_t c = threadIdx.x % kWarp + e * kWarp;
    if (c < s.dim) store_at(dqh, i, c, load_at(dqh, i, c) + acc[e]);
  }
}

__global__ void attention_dkv_kernel(AttentionShape s, AttentionView q, AttentionView k, AttentionView v,
                                     AttentionView dout, AttentionView dk, AttentionView dv, const float* lse,
                                     const float* delta) {
  const int64_t row = warp_index();
  if (row >= s.groups * s.sk) return;
  const int64_t g = row / s.sk, j = row % s.sk;
  const AttentionOperand kg = head(k, g, 0), vg = head(v, g, 0);
  float dk_acc[kLaneElements] = {}, dv_acc[kLaneElements] = {}, qi[kLaneElements], di[kLaneElements];
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t i = 0; i < s.sq; ++i) {
      if (j < first_column(s, g, i) || j >= last_column(s, i)) continue;
      const int64_t r = (g * s.heads + h) * s.sq + i;
      load_lane(qi, head(q, g, h), i, s.dim);
      load_lane(di, head(dout, g, h), i, s.dim);
      const Gradient gr = gradient(s, g, h, i, j, qi, di, kg, vg, lse[r], delta[r]);
      for (int e = 0; e < kLaneElements; ++e) {
        dv_acc[e] += gr.p * gr.z * di[e];
        dk_acc[e] += s.scale * gr.ds * qi[e];
      }
    }
  const AttentionOperand dkg = head(dk, g, 0), dvg = head(dv, g, 0);
  for (int e = 0; e < kLaneElements; ++e) {
    const int64_t c = threadIdx.x % kWarp + e * kWarp;
    if (c >= s.dim) continue;
    store_at(dkg, j, c, load_at(dkg, j, c) + dk_acc[e]);
    store_at(dvg, j, c, load_at(dvg, j, c) + dv_acc[e]);
  }
}

unsigned warp_blocks(int64_t rows) { return unsigned((rows * kWarp + kThreads - 1) / kThreads); }

}  // namespace

void attention_forward(cudaStream_t stream, const AttentionShape& s, AttentionView q, AttentionView k, AttentionView v,
                       AttentionView out, float* lse) {
  const int64_t rows = s.groups * s.heads * s.sq;
  if (rows == 0) return;
  attention_forward_kernel<<<warp_blocks(rows), kThreads, 0, stream>>>(s, q, k, v, out, lse);
  check_launch("attention");
}

void attention_backward(cudaStream_t stream, const AttentionShape& s, AttentionView q, AttentionView k,
                        AttentionView v, AttentionView out, AttentionView dout, const float* lse, AttentionView dq,
                        AttentionView dk, AttentionView dv, float* delta) {
  const int64_t rows = s.groups * s.heads * s.sq;
  if (rows == 0 || s.sk == 0) return;
  attention_delta_kernel<<<warp_blocks(rows), kThreads, 0, stream>>>(s, dout, out, delta);
  attention_dq_kernel<<<warp_blocks(rows), kThreads, 0, stream>>>(s, q, k, v, dout, dq, lse, delta);
  attention_dkv_kernel<<<warp_blocks(s.groups * s.sk), kThreads, 0, stream>>>(s, q, k, v, dout, dk, dv, lse, delta);
  check_launch("attention_bwd");
}

}  // namespace mh::kernels::gpu
