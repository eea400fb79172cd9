// The norm part: LayerNorm (scale and shift) or RMSNorm (scale only), one
// class each, chosen by the model's specification (layer_parts.hpp). Its
// output buffer keeps the f32 statistics backward reads (activations.hpp),
// so keeping, dropping or recomputing the output does the same to them.
#pragma once

#include <memory>

#include "engine/parts/part_context.hpp"

namespace mh {

class NormPart {
 public:
  explicit NormPart(const PartContext& c) : c_(c) {}
  virtual ~NormPart() = default;

  // out [local_rows, h] = norm(x) with scale w (and shift b, -1 when the
  // norm has none), in a new kept buffer.
  virtual Buffer forward(TypedPtr x, int w, int b) const = 0;
  // dx += d norm(x) / dx applied to dout; the scale's (and shift's)
  // gradients accumulate. out: the forward's kept output.
  virtual void backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const = 0;

 protected:
  Buffer output() const;
  // Where the kernel writes parameter `id`'s gradient: its own, or
  // `discarded` (h floats) when it is frozen.
  float* weight_grad(int id, Buffer& discarded) const;
  PartContext c_;
};

// out = (x - mean) / sqrt(var + eps) * w + b.
class LayerNormPart final : public NormPart {
 public:
  using NormPart::NormPart;
  Buffer forward(TypedPtr x, int w, int b) const override;
  void backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const override;
};

// out = x / sqrt(mean(x^2) + eps) * w; b is -1.
class RmsNormPart final : public NormPart {
 public:
  using NormPart::NormPart;
  Buffer forward(TypedPtr x, int w, int b) const override;
  void backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const override;

 private:
  // RMSNorm's kernels take the scale in f32; without master weights (the
  // distributed optimizer holds them) the set has only its compute-dtype
  // copy, which `staged` then holds in f32.
  const float* f32_scale(int w, Buffer& staged) const;
};

}  // namespace mh
