#include "engine/parts/lora.hpp"

#include "engine/ops.hpp"

namespace mh {
namespace {

// The adapter's dropout mask over the rows of the rank's context chunk k of
// x [N, in]: the whole input's counters beside a column-parallel layer, the
// rank's columns of them beside a row-parallel one (proj, fc2), whose input
// is split by columns; the chunk's rows from its first global row.
MH_RngSpan lora_span(const PartContext& c, const LoraDropout& drop, LoraTarget target, int64_t in, int64_t k) {
  const bool row_parallel = target == kLoraProj || target == kLoraFc2;
  const uint64_t shards = row_parallel ? uint64_t(c.d.tp) : 1, first = row_parallel ? uint64_t(c.d.tp_rank) : 0;
  const uint64_t first_row = uint64_t(c.d.chunk_start(k) * c.d.micro_batch);
  return MH_RngSpan{rng::splitmix64(drop.stream ^ uint64_t(target)), (first + first_row * shards) * uint64_t(in),
                    uint64_t(in), shards * uint64_t(in)};
}

// out = dropout(x) + residual (may be empty) over the rank's x [N, in], chunk
// by chunk of its context rows; the backward redraws the same mask.
void adapter_dropout(const PartContext& c, const LoraDropout& drop, LoraTarget target, int64_t in, TypedPtr x,
                     TypedPtr residual, TypedPtr out, uint8_t* mask) {
  const int64_t chunk = c.d.chunk_len() * c.d.micro_batch * in;
  for (int64_t k = 0; k < c.d.chunks(); ++k)
    ops::dropout(c.dev, x + k * chunk, residual.data != nullptr ? residual + k * chunk : TypedPtr{}, out + k * chunk,
                 mask + k * chunk, chunk, drop.p, lora_span(c, drop, target, in, k));
}

// The adapter's input: x, or dropout(x) into `kept` when dropout is on.
TypedPtr adapter_input(const PartContext& c, const LoraDropout& drop, LoraTarget target, TypedPtr x, int64_t in,
                       Buffer& kept) {
  if (drop.p == 0) return x;
  const int64_t n = c.d.rows() * in;
  kept = c.activation(MemCategory::kWorkspace, n);
  Buffer mask(c.dev, MemCategory::kWorkspace, n, MH_U8);
  adapter_dropout(c, drop, target, in, x, {}, kept.ptr(), static_cast<uint8_t*>(mask.data()));
  return kept.ptr();
}

// z [N, r] = scale * x @ A^T.
Buffer low_rank(const PartContext& c, const LoraIds& ids, TypedPtr x, int64_t in) {
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer z = c.activation(MemCategory::kWorkspace, N * r);
  ops::gemm(c.dev, x.t({1, N, in}), c.P(ids.a).t({1, r, in}), z.t({1, N, r}), false, true, 0, c.d.lora.scale);
  return z;
}

}  // namespace

LoraDropout lora_dropout(const LayerPass& pass, int64_t layer) {
  return {pass.lora_dropout, dropout_stream(pass.key, layer, kDropoutSiteLora)};
}

void lora_forward(const PartContext& c, const LoraIds& ids, const LoraDropout& drop, LoraTarget target, TypedPtr x,
                  MH_Tensor y, int64_t in, int64_t out) {
  if (!ids.on()) return;
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer kept;
  Buffer z = low_rank(c, ids, adapter_input(c, drop, target, x, in, kept), in);
  ops::gemm(c.dev, z.t({1, N, r}), c.P(ids.b).t({1, out, r}), y, false, true, 1);
}

// With x' = dropout(x) and z = scale * x' A^T:  dB += dy^T z;  dz = scale * dy B;
// dA += dz^T x';  dx += dropout_bwd(dz A), which is the forward dropout of dz A
// (same counters, same mask) added onto dx.
void lora_backward(const PartContext& c, const LoraIds& ids, const LoraDropout& drop, LoraTarget target, TypedPtr x,
                   MH_Tensor dy, TypedPtr dx, int64_t in, int64_t out) {
  if (!ids.on()) return;
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer kept;
  const TypedPtr xa = adapter_input(c, drop, target, x, in, kept);
  Buffer z = low_rank(c, ids, xa, in);
  ops::gemm(c.dev, dy, z.t({1, N, r}), TypedPtr(c.G(ids.b)).t({1, out, r}), true, false, 1);
  z.release();
  Buffer dz = c.activation(MemCategory::kWorkspace, N * r);
  ops::gemm(c.dev, dy, c.P(ids.b).t({1, out, r}), dz.t({1, N, r}), false, false, 0, c.d.lora.scale);
  ops::gemm(c.dev, dz.t({1, N, r}), xa.t({1, N, in}), TypedPtr(c.G(ids.a)).t({1, r, in}), true, false, 1);
  kept.release();
  if (drop.p == 0) {
    ops::gemm(c.dev, dz.t({1, N, r}), c.P(ids.a).t({1, r, in}), dx.t({1, N, in}), false, false, 1);
    return;
  }
  Buffer dxa(c.dev, MemCategory::kWorkspace, N * in, dx.dtype), mask(c.dev, MemCategory::kWorkspace, N * in, MH_U8);
  ops::gemm(c.dev, dz.t({1, N, r}), c.P(ids.a).t({1, r, in}), dxa.t({1, N, in}), false, false, 0);
  adapter_dropout(c, drop, target, in, dxa.ptr(), dx, dx, static_cast<uint8_t*>(mask.data()));
}

void adapted_projection(const PartContext& c, TypedPtr x, int weight, const LoraIds& lora, const LoraDropout& drop,
                        LoraTarget target, float* partial, int64_t in, int64_t out) {
  const int64_t N = c.d.rows();
  ops::linear(c.dev, x, c.P(weight), partial, N, in, out);
  lora_forward(c, lora, drop, target, x, TypedPtr(partial).t({1, N, out}), in, out);
}

Buffer adapted_projection_bwd(const PartContext& c, TypedPtr x, int weight, const LoraIds& lora,
                              const LoraDropout& drop, LoraTarget target, TypedPtr dy, int64_t in, int64_t out) {
  const int64_t N = c.d.rows();
  Buffer dx = c.activation(MemCategory::kWorkspace, N * in);
  ops::linear_dx(c.dev, dy, c.P(weight), dx.ptr(), N, in, out);
  ops::linear_dw(c.dev, dy, x, c.G(weight), N, in, out);
  lora_backward(c, lora, drop, target, x, dy.t({1, N, out}), dx.ptr(), in, out);
  return dx;
}

}  // namespace mh
