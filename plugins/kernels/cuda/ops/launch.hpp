// The CUDA ops: each function enqueues its kernels on `stream` and returns
// at once; a launch that fails throws mh::Error naming the op. Letters as in
// abi.h: N rows (tokens), C columns (channels), G groups of scores
// (batch x heads), S sequence, V vocabulary (the local shard), R rows of an
// embedding table. Every float tensor is f32 or bf16 (Floats) and is read
// and written as f32: arithmetic and accumulation are f32 throughout.
//
// Plain C++17 so that the .cu files (nvcc, see cmake/MegahostCuda.cmake) and
// the C++20 component include it alike.
#pragma once

#include <megahost/abi.h>

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mh::kernels::gpu {

// A float tensor on the device: f32 elements, or bf16 when `bf16` is set.
struct Floats {
  void* data;
  bool bf16;
};

// Row blocks of the column sums (bias_backward, layernorm_backward): the
// rows are split into at most this many chunks, summed in parallel into
// partial sums, which a second kernel adds up in a fixed order.
inline constexpr int64_t kColumnChunks = 64;
// Bytes of device scratch a column sum of C columns needs.
inline uint64_t column_scratch_bytes(int64_t C) { return uint64_t(2 * kColumnChunks * C) * sizeof(float); }

// Blocks of sum_squares' first pass, each leaving one double partial sum.
inline constexpr int64_t kSumBlocks = 1024;
inline constexpr uint64_t kSumScratchBytes = kSumBlocks * sizeof(double);

// out, x (N, C); weight, bias (C); mean, rstd (N) f32. out may alias x.
void layernorm_forward(cudaStream_t stream, Floats out, float* mean, float* rstd, Floats x, Floats weight,
                       Floats bias, int64_t N, int64_t C, float eps);
// dx (N, C) +=; dweight, dbias (C) +=; dout, x (N, C); weight (C); mean, rstd
// (N). dx may alias dout. scratch: column_scratch_bytes(C).
void layernorm_backward(cudaStream_t stream, Floats dx, Floats dweight, Floats dbias, Floats dout, Floats x,
                        Floats weight, const float* mean, const float* rstd, int64_t N, int64_t C, void* scratch);

// out = op(x, y, alpha) over n elements (MH_UnaryOp); out may alias x or y.
// MH_COPY between dtypes converts (rounding to nearest even into bf16).
void elementwise(cudaStream_t stream, int32_t op, Floats out, Floats x, Floats y, float alpha, int64_t n);
// c = beta * c over the [batch, rows, cols] view with batch stride `step` and
// leading dimension `ld`; beta 0 writes zeros, NaN in c or not (as BLAS).
void scale_matrices(cudaStream_t stream, Floats c, float beta, int64_t batch, int64_t rows, int64_t cols, int64_t step,
                    int64_t ld);
// out[i] = uniform draw of (seed, i) - 0.5: operands of the peak measurement.
void fill_uniform(cudaStream_t stream, Floats out, int64_t n, uint64_t seed);

// out, x (N, C); bias (C); out may alias x.
void bias_forward(cudaStream_t stream, Floats out, Floats x, Floats bias, int64_t N, int64_t C);
// dbias (C) += column sums of dout (N, C). scratch: column_scratch_bytes(C).
void bias_backward(cudaStream_t stream, Floats dbias, Floats dout, int64_t N, int64_t C, void* scratch);

// A packed-documents table beside G groups (MH_SoftmaxArgs.starts,
// MH_RopeArgs.positions): I32 [G / per_sample, cols] on the device, group g
// reading row g / per_sample; data NULL when absent.
struct SampleTable {
  const int32_t* data;
  int64_t per_sample, cols;
};

// out, x (G, Q, T): causal softmax of scale * x along the last dimension, the
// Q rows being the last Q positions of T (Q = T = S in training); position p
// sees columns starts[p] .. p of its sample's row of `starts` (0 .. p without
// it); masked entries come out 0. out may alias x.
void softmax_forward(cudaStream_t stream, Floats out, Floats x, float scale, int64_t G, int64_t Q, int64_t T,
                     SampleTable starts);
// dx, out, dout (G, Q, T); dx may alias dout.
void softmax_backward(cudaStream_t stream, Floats dx, Floats out, Floats dout, float scale, int64_t G, int64_t Q,
                      int64_t T, SampleTable starts);

// out, x, residual (n; residual.data may be NULL), mask u8 (n), drawn with
// mh::rng exactly as the cpu kernels draw it.
void dropout_forward(cudaStream_t stream, Floats out, uint8_t* mask, Floats x, Floats residual, float p,
                     const MH_RngSpan& rng, int64_t n);
// dx, dout, mask (n); dx may alias dout.
void dropout_backward(cudaStream_t stream, Floats dx, Floats dout, const uint8_t* mask, float p, int64_t n);

// out (N, C) (+)= table[ids - id_start]; table (R, C); ids (N).
void embedding_forward(cudaStream_t stream, Floats out, Floats table, const int32_t* ids, int64_t id_start,
                       bool accumulate, int64_t N, int64_t R, int64_t C);
// dtable (R, C) += dout (N, C) rows by ids (N), with atomic adds.
void embedding_backward(cudaStream_t stream, Floats dtable, Floats dout, const int32_t* ids, int64_t id_start,
                        int64_t N, int64_t R, int64_t C);

// logits (N, V) hold ids [id_start, id_start + V), of which the first
// in_vocab columns are in the vocabulary (the rest are padding: left out of
// the max and the sum, gradient 0); row_max, sum_exp, target_logit, targets (N).
void xent_max(cudaStream_t stream, float* row_max, Floats logits, int64_t N, int64_t V, int64_t in_vocab);
void xent_stats(cudaStream_t stream, float* sum_exp, float* target_logit, Floats logits, const float* row_max,
                const int32_t* targets, int64_t id_start, int64_t N, int64_t V, int64_t in_vocab);
// logits <- scale * (softmax - onehot(target)), in place
void xent_backward(cudaStream_t stream, Floats logits, const float* row_max, const float* sum_exp,
                   const int32_t* targets, int64_t id_start, float scale, int64_t N, int64_t V, int64_t in_vocab);

// The scalars of one AdamW step; corrections are 1 - beta^t.
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay, correction1, correction2;
};
// param, m, v, grad (n) f32.
void adamw(cudaStream_t stream, float* param, float* m, float* v, const float* grad, const AdamWStep& step,
           int64_t n);

// out[0] (f32) += sum of x^2, accumulated in double in a fixed order.
// scratch: kSumScratchBytes.
void sum_squares(cudaStream_t stream, float* out, Floats x, int64_t n, void* scratch);

// out, x (N, C); weight (C), rstd (N) f32. out may alias x.
void rmsnorm_forward(cudaStream_t stream, Floats out, float* rstd, Floats x, const float* weight, int64_t N, int64_t C,
                     float eps);
// dx (N, C) f32 +=; dweight (C) f32 +=; dout, x (N, C); weight (C), rstd (N)
// f32. dx may alias dout. scratch: column_scratch_bytes(C).
void rmsnorm_backward(cudaStream_t stream, float* dx, float* dweight, Floats dout, Floats x, const float* weight,
                      const float* rstd, int64_t N, int64_t C, void* scratch);

// Where the rows of a [G, S, D] view (rope, strided_copy) lie: row s of
// batch g starts at g * batch + s * row elements from the data.
struct RowStrides {
  int64_t batch, row;
};
// out, x (G, S, D): each row's pairs (i, i + D/2) rotated by position
// (position_offset + s, or position_offset + positions[s] of its sample's row
// when positions is given) times theta^(-2i/D), or back when inverse; out may be x.
void rope(cudaStream_t stream, Floats out, RowStrides out_strides, Floats x, RowStrides x_strides, int64_t G,
          int64_t S, int64_t D, int64_t position_offset, float theta, bool inverse, SampleTable positions);

// out[g, r, :] = x[g, r, :] for the [G, R, C] views, bit for bit, in words of
// element_bytes (2 or 4: bf16, f16, f32, i32). The views do not overlap.
void strided_copy(cudaStream_t stream, void* out, RowStrides out_strides, const void* x, RowStrides x_strides,
                  int64_t G, int64_t R, int64_t C, int64_t element_bytes);

// out (N, F) = silu(gate) * up, with x (N, 2F) in rows ldx apart: gate, then up.
void swiglu_forward(cudaStream_t stream, Floats out, Floats x, int64_t ldx, int64_t N, int64_t F);
// dx (N, 2F, rows lddx apart) = [dout * up * silu'(gate), dout * silu(gate)]; dout (N, F).
void swiglu_backward(cudaStream_t stream, Floats dx, int64_t lddx, Floats x, int64_t ldx, Floats dout, int64_t N,
                     int64_t F);

// Memory-efficient attention (abi.h MH_AttentionArgs). A view of q-like
// tensors [G, M, S, D] (k-like [G, S, D] with head = 0): element (g, h, r, c)
// at g * group + h * head + r * row + c.
struct AttentionView {
  void* data;
  bool bf16;
  int64_t group, head, row;
};
// One head's rows, as the kernels read them.
struct AttentionOperand {
  void* data;
  bool bf16;
  int64_t ld;
};
// The sizes, masking and dropout of one call (validated): starts I32
// [G / per_sample, sq] or NULL; dropout draws index probabilities [G, M,
// rows, cols] at (row0 + i, col0 + j).
struct AttentionShape {
  int64_t groups, heads, sq, sk, dim, q_offset;
  const int32_t* starts;
  int64_t per_sample;
  float scale, dropout;
  MH_RngSpan rng;
  int64_t rows, cols, row0, col0;
  bool accumulate;  // the forward merges into out and lse (ring attention)
};
// Elements of a row each lane holds: D <= 32 * kLaneElements.
inline constexpr int kLaneElements = 8;
// out (written), lse f32 [G, M, Sq] (written; both read first with accumulate).
void attention_forward(cudaStream_t stream, const AttentionShape& s, AttentionView q, AttentionView k, AttentionView v,
                       AttentionView out, float* lse);
// dq, dk, dv +=; delta: device scratch of G * M * Sq floats.
void attention_backward(cudaStream_t stream, const AttentionShape& s, AttentionView q, AttentionView k,
                        AttentionView v, AttentionView out, AttentionView dout, const float* lse, AttentionView dq,
                        AttentionView dk, AttentionView dv, float* delta);

}  // namespace mh::kernels::gpu
