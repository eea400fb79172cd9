// The model's building blocks as plain functions over device pointers, each
// with its shapes; they fill the op argument structs of the kernels table.
#pragma once

#include <megahost/abi.h>

#include <cstdint>

#include "engine/device.hpp"

namespace mh::ops {

// c = op(a) @ op(b) + beta * c over [batch, rows, cols] views (MH_GemmArgs).
void gemm(Device& d, MH_Tensor a, MH_Tensor b, MH_Tensor c, bool trans_a, bool trans_b, float beta);
// y [n, out] = x [n, in] @ w^T + beta * y, with w [out, in].
void linear(Device& d, const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out, float beta = 0);
// dx [n, in] = dy [n, out] @ w + beta * dx.
void linear_dx(Device& d, const float* dy, const float* w, float* dx, int64_t n, int64_t in, int64_t out,
               float beta = 0);
// dw [out, in] += dy^T @ x.
void linear_dw(Device& d, const float* dy, const float* x, float* dw, int64_t n, int64_t in, int64_t out);
// y [n, c] += bias [c];  dbias [c] += column sums of dy [n, c].
void bias_add(Device& d, float* y, const float* bias, int64_t n, int64_t c);
void bias_bwd(Device& d, const float* dy, float* dbias, int64_t n, int64_t c);
// out [n, h] = layernorm(x); stats [2, n] holds mean then rstd.
void layernorm(Device& d, const float* x, const float* w, const float* b, float* out, float* stats, int64_t n,
               int64_t h, float eps);
// dx += ..., dw += ..., db += ...
void layernorm_bwd(Device& d, const float* dout, const float* x, const float* w, const float* stats, float* dx,
                   float* dw, float* db, int64_t n, int64_t h);
// out [n] = dropout(x) + residual (residual may be NULL); mask u8 [n].
void dropout(Device& d, const float* x, const float* residual, float* out, uint8_t* mask, int64_t n, float p,
             const MH_RngSpan& rng);
void dropout_bwd(Device& d, const float* dout, const uint8_t* mask, float* dx, int64_t n, float p);
void gelu(Device& d, const float* x, float* out, int64_t n);
// dx [n] = dy * gelu'(x); dx may alias dy.
void gelu_bwd(Device& d, const float* x, const float* dy, float* dx, int64_t n);
void fill(Device& d, float* out, int64_t n, float value);
void copy(Device& d, const float* x, float* out, int64_t n);
void scale(Device& d, float* x, int64_t n, float alpha);
// out [n, h] (+)= table[ids - id_start]; dtable[ids - id_start] += dout.
void embedding(Device& d, const float* table, int64_t table_rows, const int32_t* ids, float* out, int64_t n,
               int64_t h, int64_t id_start, bool accumulate);
void embedding_bwd(Device& d, float* dtable, int64_t table_rows, const int32_t* ids, const float* dout, int64_t n,
                   int64_t h, int64_t id_start);

}  // namespace mh::ops
