// The model's building blocks as plain functions over typed device pointers,
// each with its shapes; they fill the op argument structs of the kernels
// table. Every tensor keeps the dtype its pointer carries: activations in the
// compute dtype, parameters, gradients and layernorm statistics in f32.
#pragma once

#include <megahost/abi.h>

#include <cstdint>

#include "engine/device.hpp"

namespace mh::ops {

// c = alpha * op(a) @ op(b) + beta * c over [batch, rows, cols] views (MH_GemmArgs).
void gemm(Device& d, MH_Tensor a, MH_Tensor b, MH_Tensor c, bool trans_a, bool trans_b, float beta,
          float alpha = 1);
// y [n, out] = x [n, in] @ w^T + beta * y, with w [out, in].
void linear(Device& d, TypedPtr x, TypedPtr w, TypedPtr y, int64_t n, int64_t in, int64_t out, float beta = 0);
// dx [n, in] = dy [n, out] @ w + beta * dx.
void linear_dx(Device& d, TypedPtr dy, TypedPtr w, TypedPtr dx, int64_t n, int64_t in, int64_t out, float beta = 0);
// dw [out, in] += dy^T @ x; nothing for a frozen weight (dw null), the
// GEMM that fine-tuning with LoRA skips.
void linear_dw(Device& d, TypedPtr dy, TypedPtr x, TypedPtr dw, int64_t n, int64_t in, int64_t out);
// y [n, c] += bias [c];  dbias [c] += column sums of dy [n, c] (nothing when
// dbias is null: a frozen bias).
void bias_add(Device& d, TypedPtr y, TypedPtr bias, int64_t n, int64_t c);
void bias_bwd(Device& d, TypedPtr dy, TypedPtr dbias, int64_t n, int64_t c);
// out [n, h] = layernorm(x); stats f32 [2, n] holds mean then rstd.
void layernorm(Device& d, TypedPtr x, TypedPtr w, TypedPtr b, TypedPtr out, float* stats, int64_t n, int64_t h,
               float eps);
// dx += ..., dw += ..., db += ...
void layernorm_bwd(Device& d, TypedPtr dout, TypedPtr x, TypedPtr w, const float* stats, TypedPtr dx, TypedPtr dw,
                   TypedPtr db, int64_t n, int64_t h);
// out [n] = dropout(x) + residual (residual may be empty); mask u8 [n].
void dropout(Device& d, TypedPtr x, TypedPtr residual, TypedPtr out, uint8_t* mask, int64_t n, float p,
             const MH_RngSpan& rng);
void dropout_bwd(Device& d, TypedPtr dout, const uint8_t* mask, TypedPtr dx, int64_t n, float p);
void gelu(Device& d, TypedPtr x, TypedPtr out, int64_t n);
// dx [n] = dy * gelu'(x); dx may alias dy.
void gelu_bwd(Device& d, TypedPtr x, TypedPtr dy, TypedPtr dx, int64_t n);
void fill(Device& d, TypedPtr out, int64_t n, float value);
// out [n] = x [n], converting where their dtypes differ.
void copy(Device& d, TypedPtr x, TypedPtr out, int64_t n);
void scale(Device& d, TypedPtr x, int64_t n, float alpha);
// out [n, h] (+)= table[ids - id_start]; dtable[ids - id_start] += dout
// (nothing when dtable is null: a frozen table).
void embedding(Device& d, TypedPtr table, int64_t table_rows, const int32_t* ids, TypedPtr out, int64_t n, int64_t h,
               int64_t id_start, bool accumulate);
void embedding_bwd(Device& d, TypedPtr dtable, int64_t table_rows, const int32_t* ids, TypedPtr dout, int64_t n,
                   int64_t h, int64_t id_start);

// Ops a plugin may leave out (abi.h): a caller checks Device::require_op
// before a model needs them.
// out [n, c] = x * rstd * weight (RMSNorm); weight f32 [c]; rstd f32 [n], kept for the backward.
void rmsnorm(Device& d, TypedPtr x, const float* weight, TypedPtr out, float* rstd, int64_t n, int64_t c, float eps);
// dx [n, c] += ..., dweight [c] += ... (both f32).
void rmsnorm_bwd(Device& d, TypedPtr dout, TypedPtr x, const float* weight, const float* rstd, float* dx,
                 float* dweight, int64_t n, int64_t c);
// Rotates the [G, S, D] view (gemm-style strides) in place, row s at position
// position_offset + s; inverse rotates back, which is the backward.
// positions: I32 [b, rows] of packed documents' positions (MH_RopeArgs), or
// data NULL for rows at position_offset + row.
void rope(Device& d, MH_Tensor heads, int64_t position_offset, const MH_Tensor& positions, float theta, bool inverse);

// An op a plugin may leave out (the generation engine checks
// Device::require_op first).
// out = x over two [G, R, C] views of one dtype, gemm-style strides, not
// overlapping: appends keys and values to a KV cache.
void strided_copy(Device& d, MH_Tensor x, MH_Tensor out);
// out [n, f] = silu(x[:, :f]) * x[:, f:], x [n, 2f].
void swiglu(Device& d, TypedPtr x, TypedPtr out, int64_t n, int64_t f);
// dx [n, 2f] = (dgate, dup) from dout [n, f]; written, not accumulated; dx aliases neither x nor dout.
void swiglu_bwd(Device& d, TypedPtr x, TypedPtr dout, TypedPtr dx, int64_t n, int64_t f);

}  // namespace mh::ops
