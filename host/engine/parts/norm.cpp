#include "engine/parts/norm.hpp"

#include "engine/activations.hpp"
#include "engine/ops.hpp"

namespace mh {

Buffer NormPart::output() const {
  return layernorm_buffer(c_.dev, MemCategory::kActivations, c_.d.local_rows(), c_.d.hidden,
                          c_.dev.info().compute_dtype);
}

// The norm kernels write the weight's gradient beside the input's; a
// frozen norm's goes to a scratch buffer.
float* NormPart::weight_grad(int id, Buffer& discarded) const {
  if (float* grad = c_.G(id)) return grad;
  discarded = Buffer(c_.dev, MemCategory::kWorkspace, c_.d.hidden);
  ops::fill(c_.dev, discarded.ptr(), c_.d.hidden, 0);
  return discarded.f32();
}

Buffer LayerNormPart::forward(TypedPtr x, int w, int b) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer out = output();
  ops::layernorm(c_.dev, x, c_.P(w), c_.P(b), out.ptr(), layernorm_stats(out, n, h), n, h, c_.d.layernorm_eps);
  return out;
}

void LayerNormPart::backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer dw, db;
  ops::layernorm_bwd(c_.dev, dout, x, c_.P(w), layernorm_stats(out, n, h), dx, weight_grad(w, dw),
                     weight_grad(b, db), n, h);
}

const float* RmsNormPart::f32_scale(int w, Buffer& staged) const {
  const TypedPtr p = c_.P(w);
  if (p.dtype == MH_F32) return static_cast<const float*>(p.data);
  staged = Buffer(c_.dev, MemCategory::kWorkspace, c_.d.hidden);
  ops::copy(c_.dev, p, staged.ptr(), c_.d.hidden);
  return staged.f32();
}

Buffer RmsNormPart::forward(TypedPtr x, int w, int) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer out = output(), staged;
  ops::rmsnorm(c_.dev, x, f32_scale(w, staged), out.ptr(), layernorm_stats(out, n, h), n, h, c_.d.layernorm_eps);
  return out;
}

void RmsNormPart::backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int, float* dx) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer staged, dw;
  ops::rmsnorm_bwd(c_.dev, dout, x, f32_scale(w, staged), layernorm_stats(out, n, h), dx, weight_grad(w, dw), n, h);
}

}  // namespace mh
