#include "engine/ops.hpp"

namespace mh::ops {
namespace {

MH_Tensor mat(const float* p, int64_t rows, int64_t cols) {
  return view(const_cast<float*>(p), MH_F32, {1, rows, cols});
}

MH_Tensor flat(const void* p, int64_t n, int32_t dtype = MH_F32) { return view(const_cast<void*>(p), dtype, {n}); }

void elementwise(Device& d, MH_UnaryOp op, const float* x, const float* y, float* out, int64_t n, float alpha) {
  MH_ElementwiseArgs e{};
  e.op = op;
  e.x = flat(x, n);
  e.y = flat(y, n);
  e.out = flat(out, n);
  e.alpha = alpha;
  d.run(&MH_KernelsApi::elementwise, e, "elementwise");
}

}  // namespace

void gemm(Device& d, MH_Tensor a, MH_Tensor b, MH_Tensor c, bool trans_a, bool trans_b, float beta) {
  MH_GemmArgs g{};
  g.a = a;
  g.b = b;
  g.c = c;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.alpha = 1;
  g.beta = beta;
  d.run(&MH_KernelsApi::gemm, g, "gemm");
  const double m = double(trans_a ? a.shape[2] : a.shape[1]), k = double(trans_a ? a.shape[1] : a.shape[2]);
  const double n = double(trans_b ? b.shape[1] : b.shape[2]);
  d.count_gemm_flops(2 * m * n * k * double(c.shape[0]));
}

void linear(Device& d, const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out, float beta) {
  gemm(d, mat(x, n, in), mat(w, out, in), mat(y, n, out), false, true, beta);
}

void linear_dx(Device& d, const float* dy, const float* w, float* dx, int64_t n, int64_t in, int64_t out,
               float beta) {
  gemm(d, mat(dy, n, out), mat(w, out, in), mat(dx, n, in), false, false, beta);
}

void linear_dw(Device& d, const float* dy, const float* x, float* dw, int64_t n, int64_t in, int64_t out) {
  gemm(d, mat(dy, n, out), mat(x, n, in), mat(dw, out, in), true, false, 1);
}

void bias_add(Device& d, float* y, const float* bias, int64_t n, int64_t c) {
  MH_BiasArgs b{};
  b.x = view(y, MH_F32, {n, c});
  b.bias = flat(bias, c);
  b.out = b.x;
  d.run(&MH_KernelsApi::bias_add, b, "bias_add");
}

void bias_bwd(Device& d, const float* dy, float* dbias, int64_t n, int64_t c) {
  MH_BiasArgs b{};
  b.x = view(const_cast<float*>(dy), MH_F32, {n, c});
  b.bias = flat(dbias, c);
  b.out = b.x;
  d.run(&MH_KernelsApi::bias_bwd, b, "bias_bwd");
}

void layernorm(Device& d, const float* x, const float* w, const float* b, float* out, float* stats, int64_t n,
               int64_t h, float eps) {
  MH_LayerNormArgs a{};
  a.x = view(const_cast<float*>(x), MH_F32, {n, h});
  a.weight = flat(w, h);
  a.bias = flat(b, h);
  a.out = view(out, MH_F32, {n, h});
  a.mean = flat(stats, n);
  a.rstd = flat(stats + n, n);
  a.eps = eps;
  d.run(&MH_KernelsApi::layernorm, a, "layernorm");
}

void layernorm_bwd(Device& d, const float* dout, const float* x, const float* w, const float* stats, float* dx,
                   float* dw, float* db, int64_t n, int64_t h) {
  MH_LayerNormBwdArgs a{};
  a.dout = view(const_cast<float*>(dout), MH_F32, {n, h});
  a.x = view(const_cast<float*>(x), MH_F32, {n, h});
  a.weight = flat(w, h);
  a.mean = flat(stats, n);
  a.rstd = flat(stats + n, n);
  a.dx = view(dx, MH_F32, {n, h});
  a.dweight = flat(dw, h);
  a.dbias = flat(db, h);
  d.run(&MH_KernelsApi::layernorm_bwd, a, "layernorm_bwd");
}

void dropout(Device& d, const float* x, const float* residual, float* out, uint8_t* mask, int64_t n, float p,
             const MH_RngSpan& rng) {
  MH_DropoutArgs a{};
  a.x = flat(x, n);
  a.residual = residual != nullptr ? flat(residual, n) : MH_Tensor{};
  a.out = flat(out, n);
  a.mask = flat(mask, n, MH_U8);
  a.p = p;
  a.rng = rng;
  d.run(&MH_KernelsApi::dropout, a, "dropout");
}

void dropout_bwd(Device& d, const float* dout, const uint8_t* mask, float* dx, int64_t n, float p) {
  MH_DropoutArgs a{};
  a.out = flat(dout, n);
  a.x = flat(dx, n);
  a.mask = flat(mask, n, MH_U8);
  a.p = p;
  d.run(&MH_KernelsApi::dropout_bwd, a, "dropout_bwd");
}

void gelu(Device& d, const float* x, float* out, int64_t n) { elementwise(d, MH_GELU, x, nullptr, out, n, 0); }

void gelu_bwd(Device& d, const float* x, const float* dy, float* dx, int64_t n) {
  elementwise(d, MH_GELU_BWD, x, dy, dx, n, 0);
}

void fill(Device& d, float* out, int64_t n, float value) { elementwise(d, MH_FILL, nullptr, nullptr, out, n, value); }

void copy(Device& d, const float* x, float* out, int64_t n) { elementwise(d, MH_COPY, x, nullptr, out, n, 0); }

void scale(Device& d, float* x, int64_t n, float alpha) { elementwise(d, MH_SCALE, x, nullptr, x, n, alpha); }

void embedding(Device& d, const float* table, int64_t table_rows, const int32_t* ids, float* out, int64_t n,
               int64_t h, int64_t id_start, bool accumulate) {
  MH_EmbeddingArgs a{};
  a.table = view(const_cast<float*>(table), MH_F32, {table_rows, h});
  a.ids = flat(ids, n, MH_I32);
  a.out = view(out, MH_F32, {n, h});
  a.id_start = id_start;
  a.accumulate = accumulate;
  d.run(&MH_KernelsApi::embedding, a, "embedding");
}

void embedding_bwd(Device& d, float* dtable, int64_t table_rows, const int32_t* ids, const float* dout, int64_t n,
                   int64_t h, int64_t id_start) {
  MH_EmbeddingArgs a{};
  a.table = view(dtable, MH_F32, {table_rows, h});
  a.ids = flat(ids, n, MH_I32);
  a.out = view(const_cast<float*>(dout), MH_F32, {n, h});
  a.id_start = id_start;
  d.run(&MH_KernelsApi::embedding_bwd, a, "embedding_bwd");
}

}  // namespace mh::ops
