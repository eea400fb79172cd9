// The CPU ops: plain functions over raw f32 arrays, one file per op family,
// written as loops GCC vectorises. Every function takes `threads`, the
// OpenMP team size of the calling rank. Letters as in abi.h: N rows (tokens),
// C columns (channels), G groups of scores (batch x heads), S sequence,
// V vocabulary (the local shard), R rows of an embedding table.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <vector>

namespace mh::kernels::cpu {

// Team size for a loop over `work` elements: small loops stay on the calling
// thread, since waking a team costs more than they take.
inline int team(int threads, int64_t work) { return work < (int64_t{1} << 15) ? 1 : threads; }

// One operand of a strided batched GEMM: matrix i starts at data + i * batch_stride.
template <class T>
struct Strided {
  const T* data;
  int64_t batch_stride;  // 0 broadcasts one matrix to the whole batch
  int64_t ld;            // leading dimension, >= the stored matrix's columns
  bool trans;            // the product uses the stored matrix transposed
};
using StridedMatrix = Strided<float>;
using Bf16Matrix = Strided<uint16_t>;  // bf16 bits

// c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i] for i < batch, where
// op(a[i]) is (M, K), op(b[i]) (K, N) and c[i] (M, N) starts at
// c + i * c_batch_stride with leading dimension ldc.
void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, StridedMatrix a, StridedMatrix b,
          float beta, float* c, int64_t c_batch_stride, int64_t ldc, int threads);
// Whether a product of these shapes streams b once (few rows of a against a
// transposed b: a decode step against a weight), the one case gemm_bf16_b takes.
bool streams_b(int64_t M, bool trans_a, bool trans_b);
// gemm with b read in bf16 as it is stored, for the streams_b shapes only:
// a decode step reads each weight once, so reading it at half the bytes
// halves the step, where staging it into f32 first would add traffic.
void gemm_bf16_b(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, StridedMatrix a, Bf16Matrix b,
                 float beta, float* c, int64_t c_batch_stride, int64_t ldc, int threads);
// c[i] (1, N) = alpha * a[i] (1, K) @ b[i]^T + beta * c[i], a and b bf16 with b
// stored (N, K): a single-stream decode step on the CPU's bf16 dot-product
// units (AVX512-BF16), for callers that found them (bf16_gemm.hpp).
void row_times_transposed_on_bf16_units(int64_t batch, int64_t N, int64_t K, float alpha, Bf16Matrix a,
                                        Bf16Matrix b, float beta, float* c, int64_t c_batch_stride, int threads);

// out, x (N, C); weight, bias (C); mean, rstd (N)
void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int64_t N, int64_t C, float eps, int threads);
// dx (N, C) +=; dweight, dbias (C) +=; dout, x (N, C); weight (C); mean, rstd (N)
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C,
                        int threads);

// Elementwise over n contiguous elements; out may alias an input.
void gelu_forward(float* out, const float* x, int64_t n, int threads);
// dx = dout * gelu'(x)
void gelu_backward(float* dx, const float* x, const float* dout, int64_t n, int threads);
// out = alpha * x
void scale(float* out, const float* x, float alpha, int64_t n, int threads);
// out = alpha * x + y
void axpy(float* out, float alpha, const float* x, const float* y, int64_t n, int threads);
// out = value
void fill(float* out, float value, int64_t n, int threads);

// out, x (N, C); bias (C); out may alias x
void bias_forward(float* out, const float* x, const float* bias, int64_t N, int64_t C, int threads);
// dbias (C) += column sums of dout (N, C)
void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C, int threads);

// out, x (G, Q, T): causal softmax of scale * x along the last dimension,
// the Q rows being positions T - Q - later .. T - later - 1 of T: the last Q
// positions (Q = T = S in training) when later = 0, else a block of rows
// followed by `later` more that this call leaves alone. starts (T), shared
// by the G groups, or NULL: position p sees columns starts[p] .. p only
// (packed documents), else 0 .. p
void softmax_forward(float* out, const float* x, float scale, int64_t G, int64_t Q, int64_t T, int64_t later,
                     const int32_t* starts, int threads);
// dx, out, dout (G, Q, T)
void softmax_backward(float* dx, const float* out, const float* dout, float scale, int64_t G, int64_t Q, int64_t T,
                      int64_t later, const int32_t* starts, int threads);

// out, x, residual (n; residual may be NULL), mask (n): elements [first,
// first + n) of the span, drawn in rows of rng.row_len
void dropout_forward(float* out, uint8_t* mask, const float* x, const float* residual, float p,
                     const MH_RngSpan& rng, int64_t first, int64_t n, int threads);
// u[k] = rng::uniform(seed, first + k) for k < n: dropout's draws, sixteen
// at a time where the CPU has AVX-512
void uniforms(uint64_t seed, uint64_t first, int64_t n, float* u);
// dx, dout, mask (n)
void dropout_backward(float* dx, const float* dout, const uint8_t* mask, float p, int64_t n, int threads);

// out (N, C); ids (N); table (R, C) holds ids [id_start, id_start + R)
void embedding_forward(float* out, const float* table, const int32_t* ids, int64_t id_start, bool accumulate,
                       int64_t N, int64_t R, int64_t C, int threads);
// The same over a bf16 table read as stored: a lookup touches a few rows of
// the table, which staging would convert whole.
void embedding_forward_bf16(float* out, const uint16_t* table, const int32_t* ids, int64_t id_start, bool accumulate,
                            int64_t N, int64_t R, int64_t C, int threads);
// dtable (R, C) +=; dout (N, C); ids (N)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t id_start, int64_t N,
                        int64_t R, int64_t C, int threads);

// logits (N, V) hold ids [id_start, id_start + V), of which the first
// in_vocab columns are in the vocabulary (the rest are padding: left out of
// the max and the sum, gradient 0); row_max, sum_exp, target_logit, targets (N)
void xent_max(float* row_max, const float* logits, int64_t N, int64_t V, int64_t in_vocab, int threads);
void xent_stats(float* sum_exp, float* target_logit, const float* logits, const float* row_max,
                const int32_t* targets, int64_t id_start, int64_t N, int64_t V, int64_t in_vocab, int threads);
// logits <- scale * (softmax - onehot(target)), in place
void xent_backward(float* logits, const float* row_max, const float* sum_exp, const int32_t* targets,
                   int64_t id_start, float scale, int64_t N, int64_t V, int64_t in_vocab, int threads);

// param, m, v, grad (n); t counts steps from 1
void adamw(float* param, float* m, float* v, const float* grad, float lr, float beta1, float beta2, float eps,
           float weight_decay, int64_t t, int64_t n, int threads);

// out[0] += sum of x^2; x (n)
void sum_squares(float* out, const float* x, int64_t n, int threads);

// out, x (N, C); weight (C); rstd (N); out may alias x
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* weight, int64_t N, int64_t C, float eps,
                     int threads);
// dx (N, C) +=; dweight (C) +=; dout, x (N, C); weight (C); rstd (N)
void rmsnorm_backward(float* dx, float* dweight, const float* dout, const float* x, const float* weight,
                      const float* rstd, int64_t N, int64_t C, int threads);

// Where the rows of a [G, S, D] view lie: row s of batch g starts at
// g * batch + s * row elements from the data.
struct RowStrides {
  int64_t batch, row;
};
// cos and sin of positions offset .. offset + S - 1 times frequencies
// theta^(-2i/D), as [S, D/2] each (sin negated when inverse)
struct RotationTable {
  std::vector<float> cos, sin;
};
RotationTable rotation_table(int64_t S, int64_t D, int64_t offset, float theta, bool inverse, int threads);
// out, x (G, S, D): each row's pairs (i, i + D/2) rotated by row first + s of
// the table, or by row positions[first + s] when positions (shared by the G
// groups) is given; out may be x
void rope(float* out, RowStrides out_strides, const float* x, RowStrides x_strides, int64_t G, int64_t S, int64_t D,
          const RotationTable& table, int64_t first, const int32_t* positions, int threads);

// out[g, r, :] = x[g, r, :] for g < G, r < R: rows of row_bytes bytes, each
// view's rows and groups `strides` elements of element_bytes apart
void strided_copy(void* out, RowStrides out_strides, const void* x, RowStrides x_strides, int64_t G, int64_t R,
                  int64_t row_bytes, int64_t element_bytes, int threads);

// out (N, F) = silu(gate) * up, with x (N, 2F) in rows ldx apart: gate, then up
void swiglu_forward(float* out, const float* x, int64_t ldx, int64_t N, int64_t F, int threads);
// dx (N, 2F, rows lddx apart) = [dout * up * silu'(gate), dout * silu(gate)]; dout (N, F)
void swiglu_backward(float* dx, int64_t lddx, const float* x, int64_t ldx, const float* dout, int64_t N, int64_t F,
                     int threads);

// One head's [S, D] rows in f32 or bf16 (dtype): row r starts at data + r * ld.
struct AttentionOperand {
  void* data;
  int32_t dtype;
  int64_t ld;
};

// Memory-efficient attention (abi.h MH_AttentionArgs) over G groups of M
// heads: q, out, dout, dq of head (g, h) and k, v, dk, dv of group g as
// operands of their strided views; lse, starts as abi.h lays them out.
struct AttentionProblem {
  MH_Tensor q_, k_, v_, out_, dout_, dq_, dk_, dv_;
  float* lse;                // [G, M, Sq]
  const int32_t* starts;     // [starts_rows, Sq] or NULL
  int64_t starts_rows;
  int64_t groups, heads, sq, sk, dim, q_offset;
  float scale, dropout;
  MH_RngSpan rng;
  int64_t rows, cols, row0, col0;  // the dropout draws' probabilities and this call's block
  bool accumulate;                 // out and lse hold earlier key blocks' result (merged into)

  static AttentionOperand head(const MH_Tensor& t, int64_t g, int64_t h) {
    const int64_t at = g * t.strides[0] + h * t.strides[1];
    return {static_cast<char*>(t.data) + at * (t.dtype == MH_F32 ? 4 : 2), t.dtype, t.strides[2]};
  }
  static AttentionOperand group(const MH_Tensor& t, int64_t g) {
    return {static_cast<char*>(t.data) + g * t.strides[0] * (t.dtype == MH_F32 ? 4 : 2), t.dtype, t.strides[1]};
  }
  AttentionOperand q(int64_t g, int64_t h) const { return head(q_, g, h); }
  AttentionOperand out(int64_t g, int64_t h) const { return head(out_, g, h); }
  AttentionOperand dout(int64_t g, int64_t h) const { return head(dout_, g, h); }
  AttentionOperand dq(int64_t g, int64_t h) const { return head(dq_, g, h); }
  AttentionOperand k(int64_t g) const { return group(k_, g); }
  AttentionOperand v(int64_t g) const { return group(v_, g); }
  AttentionOperand dk(int64_t g) const { return group(dk_, g); }
  AttentionOperand dv(int64_t g) const { return group(dv_, g); }
};
// Writes out and lse (merges into them with accumulate).
void attention_forward(const AttentionProblem& p, int threads);
// dq, dk, dv += the gradients, from q, k, v, out, dout and lse.
void attention_backward(const AttentionProblem& p, int threads);

}  // namespace mh::kernels::cpu
