#include "engine/parts/lora.hpp"

#include "engine/ops.hpp"

namespace mh {
namespace {

// z [N, r] = scale * x @ A^T.
Buffer low_rank(const PartContext& c, const LoraIds& ids, TypedPtr x, int64_t in) {
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer z = c.activation(MemCategory::kWorkspace, N * r);
  ops::gemm(c.dev, x.t({1, N, in}), c.P(ids.a).t({1, r, in}), z.t({1, N, r}), false, true, 0, c.d.lora.scale);
  return z;
}

}  // namespace

void lora_forward(const PartContext& c, const LoraIds& ids, TypedPtr x, MH_Tensor y, int64_t in, int64_t out) {
  if (!ids.on()) return;
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer z = low_rank(c, ids, x, in);
  ops::gemm(c.dev, z.t({1, N, r}), c.P(ids.b).t({1, out, r}), y, false, true, 1);
}

// With z = scale * x A^T:  dB += dy^T z;  dz = scale * dy B;  dA += dz^T x;  dx += dz A.
void lora_backward(const PartContext& c, const LoraIds& ids, TypedPtr x, MH_Tensor dy, MH_Tensor dx, int64_t in,
                   int64_t out) {
  if (!ids.on()) return;
  const int64_t N = c.d.rows(), r = c.d.lora.rank;
  Buffer z = low_rank(c, ids, x, in);
  ops::gemm(c.dev, dy, z.t({1, N, r}), TypedPtr(c.G(ids.b)).t({1, out, r}), true, false, 1);
  Buffer dz = c.activation(MemCategory::kWorkspace, N * r);
  ops::gemm(c.dev, dy, c.P(ids.b).t({1, out, r}), dz.t({1, N, r}), false, false, 0, c.d.lora.scale);
  ops::gemm(c.dev, dz.t({1, N, r}), x.t({1, N, in}), TypedPtr(c.G(ids.a)).t({1, r, in}), true, false, 1);
  ops::gemm(c.dev, dz.t({1, N, r}), c.P(ids.a).t({1, r, in}), dx, false, false, 1);
}

}  // namespace mh
