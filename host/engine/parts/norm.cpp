#include "engine/parts/norm.hpp"

#include "engine/activations.hpp"
#include "engine/ops.hpp"

namespace mh {

const float* NormPart::f32_scale(int w, Buffer& staged) const {
  const TypedPtr p = c_.P(w);
  if (p.dtype == MH_F32) return static_cast<const float*>(p.data);
  staged = Buffer(c_.dev, MemCategory::kWorkspace, c_.d.hidden);
  ops::copy(c_.dev, p, staged.ptr(), c_.d.hidden);
  return staged.f32();
}

Buffer NormPart::forward(TypedPtr x, int w, int b) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer out = layernorm_buffer(c_.dev, MemCategory::kActivations, n, h, c_.dev.info().compute_dtype);
  float* stats = layernorm_stats(out, n, h);
  Buffer staged;
  if (c_.d.spec.norm == Norm::kRmsNorm)
    ops::rmsnorm(c_.dev, x, f32_scale(w, staged), out.ptr(), stats, n, h, c_.d.layernorm_eps);
  else
    ops::layernorm(c_.dev, x, c_.P(w), c_.P(b), out.ptr(), stats, n, h, c_.d.layernorm_eps);
  return out;
}

void NormPart::backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  const float* stats = layernorm_stats(out, n, h);
  Buffer staged;
  if (c_.d.spec.norm == Norm::kRmsNorm)
    ops::rmsnorm_bwd(c_.dev, dout, x, f32_scale(w, staged), stats, dx, c_.G(w), n, h);
  else
    ops::layernorm_bwd(c_.dev, dout, x, c_.P(w), stats, dx, c_.G(w), c_.G(b), n, h);
}

}  // namespace mh
