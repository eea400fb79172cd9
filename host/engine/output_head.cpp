#include "engine/output_head.hpp"

#include "engine/ops.hpp"

namespace mh {

Buffer OutputHead::logits(const Buffer& normed, const LayerPass& pass) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, V = c_.d.local_vocab();
  Buffer gathered;
  TypedPtr in = c_.tp.enter_fwd(normed.ptr(), gathered);
  Buffer out(c_.dev, pass.inference ? MemCategory::kWorkspace : MemCategory::kActivations, N * V);
  ops::linear(c_.dev, in, c_.P(c_.params.head_w()), out.f32(), N, h, V);
  return out;
}

}  // namespace mh
