// The norm part: LayerNorm (scale and shift) or RMSNorm (scale only), as the
// model's specification says. Its output buffer keeps the f32 statistics
// backward reads (activations.hpp), so keeping, dropping or recomputing the
// output does the same to them.
#pragma once

#include "engine/parts/part_context.hpp"

namespace mh {

class NormPart {
 public:
  explicit NormPart(const PartContext& c) : c_(c) {}

  // out [local_rows, h] = norm(x) with scale w (and shift b under
  // LayerNorm, -1 under RMSNorm), in a new kept buffer.
  Buffer forward(TypedPtr x, int w, int b) const;
  // dx += d norm(x) / dx applied to dout; the scale's (and shift's)
  // gradients accumulate. out: the forward's kept output.
  void backward(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) const;

 private:
  // RMSNorm's kernels take the scale in f32; without master weights (the
  // distributed optimizer holds them) the set has only its compute-dtype
  // copy, which `staged` then holds in f32.
  const float* f32_scale(int w, Buffer& staged) const;

  PartContext c_;
};

}  // namespace mh
