#include "engine/ops.hpp"

namespace mh::ops {
namespace {

MH_Tensor mat(TypedPtr p, int64_t rows, int64_t cols) { return p.t({1, rows, cols}); }

MH_Tensor flat(const void* p, int64_t n, int32_t dtype) { return view(const_cast<void*>(p), dtype, {n}); }

void elementwise(Device& d, MH_UnaryOp op, TypedPtr x, TypedPtr y, TypedPtr out, int64_t n, float alpha) {
  MH_ElementwiseArgs e{};
  e.op = op;
  e.x = x.t({n});
  e.y = y.t({n});
  e.out = out.t({n});
  e.alpha = alpha;
  d.run(&MH_KernelsApi::elementwise, e, "elementwise");
}

}  // namespace

void gemm(Device& d, MH_Tensor a, MH_Tensor b, MH_Tensor c, bool trans_a, bool trans_b, float beta, float alpha) {
  MH_GemmArgs g{};
  g.a = a;
  g.b = b;
  g.c = c;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.alpha = alpha;
  g.beta = beta;
  d.run(&MH_KernelsApi::gemm, g, "gemm");
  const double m = double(trans_a ? a.shape[2] : a.shape[1]), k = double(trans_a ? a.shape[1] : a.shape[2]);
  const double n = double(trans_b ? b.shape[1] : b.shape[2]);
  d.count_gemm_flops(2 * m * n * k * double(c.shape[0]));
}

void linear(Device& d, TypedPtr x, TypedPtr w, TypedPtr y, int64_t n, int64_t in, int64_t out, float beta) {
  gemm(d, mat(x, n, in), mat(w, out, in), mat(y, n, out), false, true, beta);
}

void linear_dx(Device& d, TypedPtr dy, TypedPtr w, TypedPtr dx, int64_t n, int64_t in, int64_t out, float beta) {
  gemm(d, mat(dy, n, out), mat(w, out, in), mat(dx, n, in), false, false, beta);
}

void linear_dw(Device& d, TypedPtr dy, TypedPtr x, TypedPtr dw, int64_t n, int64_t in, int64_t out) {
  if (dw.data == nullptr) return;
  gemm(d, mat(dy, n, out), mat(x, n, in), mat(dw, out, in), true, false, 1);
}

void bias_add(Device& d, TypedPtr y, TypedPtr bias, int64_t n, int64_t c) {
  MH_BiasArgs b{};
  b.x = y.t({n, c});
  b.bias = bias.t({c});
  b.out = b.x;
  d.run(&MH_KernelsApi::bias_add, b, "bias_add");
}

void bias_bwd(Device& d, TypedPtr dy, TypedPtr dbias, int64_t n, int64_t c) {
  if (dbias.data == nullptr) return;
  MH_BiasArgs b{};
  b.x = dy.t({n, c});
  b.bias = dbias.t({c});
  b.out = b.x;
  d.run(&MH_KernelsApi::bias_bwd, b, "bias_bwd");
}

void layernorm(Device& d, TypedPtr x, TypedPtr w, TypedPtr b, TypedPtr out, float* stats, int64_t n, int64_t h,
               float eps) {
  MH_LayerNormArgs a{};
  a.x = x.t({n, h});
  a.weight = w.t({h});
  a.bias = b.t({h});
  a.out = out.t({n, h});
  a.mean = flat(stats, n, MH_F32);
  a.rstd = flat(stats + n, n, MH_F32);
  a.eps = eps;
  d.run(&MH_KernelsApi::layernorm, a, "layernorm");
}

void layernorm_bwd(Device& d, TypedPtr dout, TypedPtr x, TypedPtr w, const float* stats, TypedPtr dx, TypedPtr dw,
                   TypedPtr db, int64_t n, int64_t h) {
  MH_LayerNormBwdArgs a{};
  a.dout = dout.t({n, h});
  a.x = x.t({n, h});
  a.weight = w.t({h});
  a.mean = flat(stats, n, MH_F32);
  a.rstd = flat(stats + n, n, MH_F32);
  a.dx = dx.t({n, h});
  a.dweight = dw.t({h});
  a.dbias = db.t({h});
  d.run(&MH_KernelsApi::layernorm_bwd, a, "layernorm_bwd");
}

void dropout(Device& d, TypedPtr x, TypedPtr residual, TypedPtr out, uint8_t* mask, int64_t n, float p,
             const MH_RngSpan& rng) {
  MH_DropoutArgs a{};
  a.x = x.t({n});
  a.residual = residual.data != nullptr ? residual.t({n}) : MH_Tensor{};
  a.out = out.t({n});
  a.mask = flat(mask, n, MH_U8);
  a.p = p;
  a.rng = rng;
  d.run(&MH_KernelsApi::dropout, a, "dropout");
}

void dropout_bwd(Device& d, TypedPtr dout, const uint8_t* mask, TypedPtr dx, int64_t n, float p) {
  MH_DropoutArgs a{};
  a.out = dout.t({n});
  a.x = dx.t({n});
  a.mask = flat(mask, n, MH_U8);
  a.p = p;
  d.run(&MH_KernelsApi::dropout_bwd, a, "dropout_bwd");
}

void gelu(Device& d, TypedPtr x, TypedPtr out, int64_t n) { elementwise(d, MH_GELU, x, {}, out, n, 0); }

void gelu_bwd(Device& d, TypedPtr x, TypedPtr dy, TypedPtr dx, int64_t n) {
  elementwise(d, MH_GELU_BWD, x, dy, dx, n, 0);
}

void fill(Device& d, TypedPtr out, int64_t n, float value) { elementwise(d, MH_FILL, {}, {}, out, n, value); }

void copy(Device& d, TypedPtr x, TypedPtr out, int64_t n) { elementwise(d, MH_COPY, x, {}, out, n, 0); }

void scale(Device& d, TypedPtr x, int64_t n, float alpha) { elementwise(d, MH_SCALE, x, {}, x, n, alpha); }

void embedding(Device& d, TypedPtr table, int64_t table_rows, const int32_t* ids, TypedPtr out, int64_t n, int64_t h,
               int64_t id_start, bool accumulate) {
  MH_EmbeddingArgs a{};
  a.table = table.t({table_rows, h});
  a.ids = flat(ids, n, MH_I32);
  a.out = out.t({n, h});
  a.id_start = id_start;
  a.accumulate = accumulate;
  d.run(&MH_KernelsApi::embedding, a, "embedding");
}

void embedding_bwd(Device& d, TypedPtr dtable, int64_t table_rows, const int32_t* ids, TypedPtr dout, int64_t n,
                   int64_t h, int64_t id_start) {
  if (dtable.data == nullptr) return;
  MH_EmbeddingArgs a{};
  a.table = dtable.t({table_rows, h});
  a.ids = flat(ids, n, MH_I32);
  a.out = dout.t({n, h});
  a.id_start = id_start;
  d.run(&MH_KernelsApi::embedding_bwd, a, "embedding_bwd");
}

void rmsnorm(Device& d, TypedPtr x, const float* weight, TypedPtr out, float* rstd, int64_t n, int64_t c, float eps) {
  MH_RmsNormArgs a{};
  a.x = x.t({n, c});
  a.weight = flat(weight, c, MH_F32);
  a.out = out.t({n, c});
  a.rstd = flat(rstd, n, MH_F32);
  a.eps = eps;
  d.run(&MH_KernelsApi::rmsnorm, a, "rmsnorm");
}

void rmsnorm_bwd(Device& d, TypedPtr dout, TypedPtr x, const float* weight, const float* rstd, float* dx,
                 float* dweight, int64_t n, int64_t c) {
  MH_RmsNormBwdArgs a{};
  a.dout = dout.t({n, c});
  a.x = x.t({n, c});
  a.weight = flat(weight, c, MH_F32);
  a.rstd = flat(rstd, n, MH_F32);
  a.dx = view(dx, MH_F32, {n, c});
  a.dweight = flat(dweight, c, MH_F32);
  d.run(&MH_KernelsApi::rmsnorm_bwd, a, "rmsnorm_bwd");
}

void rope(Device& d, MH_Tensor heads, int64_t position_offset, const MH_Tensor& positions, float theta, bool inverse) {
  MH_RopeArgs a{};
  a.x = heads;
  a.out = heads;
  a.position_offset = position_offset;
  a.positions = positions;
  a.theta = theta;
  a.inverse = inverse;
  d.run(&MH_KernelsApi::rope, a, "rope");
}

void strided_copy(Device& d, MH_Tensor x, MH_Tensor out) {
  MH_StridedCopyArgs a{};
  a.x = x;
  a.out = out;
  d.run(&MH_KernelsApi::strided_copy, a, "strided_copy");
}

void swiglu(Device& d, TypedPtr x, TypedPtr out, int64_t n, int64_t f) {
  MH_SwigluArgs a{};
  a.x = x.t({n, 2 * f});
  a.out = out.t({n, f});
  d.run(&MH_KernelsApi::swiglu, a, "swiglu");
}

void swiglu_bwd(Device& d, TypedPtr x, TypedPtr dout, TypedPtr dx, int64_t n, int64_t f) {
  MH_SwigluArgs a{};
  a.x = x.t({n, 2 * f});
  a.dout = dout.t({n, f});
  a.dx = dx.t({n, 2 * f});
  d.run(&MH_KernelsApi::swiglu_bwd, a, "swiglu_bwd");
}

}  // namespace mh::ops
