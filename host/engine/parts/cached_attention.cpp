#include "engine/parts/cached_attention.hpp"

#include <megahost/error.hpp>

#include <cmath>

#include "engine/ops.hpp"

namespace mh {
namespace {

// One sequence's views of the packed QKV rows and the context. QKV rows are
// laid out per key/value group as in training (attention.hpp): the group's
// m query heads, its key, its value.
struct SequenceHeads {
  int64_t groups, m, D, qkv_row, ctx_row;
  const SequenceRows& s;

  SequenceHeads(const ModelDims& d, const SequenceRows& rows)
      : groups(d.local_kv_heads()), m(d.heads / d.kv()), D(d.head_dim()), qkv_row(d.local_qkv()),
        ctx_row(d.local_attention()), s(rows) {}

  // Slot j of every group (query head j < m, key m, value m + 1): [groups, count, D].
  MH_Tensor qkv(TypedPtr p, int64_t j) const {
    const TypedPtr at = p + s.row * qkv_row + j * D;
    return view(at.data, at.dtype, {groups, s.count, D}, {(m + 2) * D, qkv_row, 1});
  }
  // Query head i's context in the output projection's input rows.
  MH_Tensor context(TypedPtr p, int64_t i) const {
    const TypedPtr at = p + s.row * ctx_row + i * D;
    return view(at.data, at.dtype, {groups, s.count, D}, {m * D, ctx_row, 1});
  }
  // Query head i's scores over the `seen` positions, in a [m, groups, count, seen] buffer.
  MH_Tensor scores(TypedPtr p, int64_t i, int64_t seen) const {
    const TypedPtr at = p + i * groups * s.count * seen;
    return view(at.data, at.dtype, {groups, s.count, seen}, {s.count * seen, seen, 1});
  }
};

}  // namespace

void CachedAttention::forward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass&) const {
  AttentionPart::project(c_, A, w, LoraDropout{});  // inference: no dropout
  A[kActContext] = c_.activation(MemCategory::kActivations, c_.d.rows() * c_.d.local_attention());
  for (const SequenceRows& s : seqs_) {
    const SequenceHeads H(c_.d, s);
    encode(A[kActQkv].ptr(), s);
    ops::strided_copy(c_.dev, H.qkv(A[kActQkv].ptr(), H.m), cache_.keys(layer, s.slot, s.past, s.count));
    ops::strided_copy(c_.dev, H.qkv(A[kActQkv].ptr(), H.m + 1), cache_.values(layer, s.slot, s.past, s.count));
    attend(A, layer, s);
  }
}

void CachedAttention::backward(LayerActivations&, const LayerParamIds&, int64_t, const LayerPass&, TypedPtr,
                               Buffer&) const {
  throw Error(MH_INTERNAL, "cached attention serves inference: it has no backward");
}

// The query heads and the key of each group, each at the sequence's positions.
void CachedAttention::encode(TypedPtr qkv, const SequenceRows& s) const {
  const SequenceHeads H(c_.d, s);
  for (int64_t j = 0; j <= H.m; ++j) position_.encode(H.qkv(qkv, j), s.past, MH_Tensor{}, false);
}

// The new rows are the last `count` of the `seen` positions, which the
// softmax's [G, count, seen] causal mask expects.
void CachedAttention::attend(LayerActivations& A, int64_t layer, const SequenceRows& s) const {
  const SequenceHeads H(c_.d, s);
  const int64_t seen = s.past + s.count;
  const MH_Tensor keys = cache_.keys(layer, s.slot, 0, seen), values = cache_.values(layer, s.slot, 0, seen);
  Buffer scores = c_.activation(MemCategory::kWorkspace, H.m * H.groups * s.count * seen);
  for (int64_t i = 0; i < H.m; ++i)
    ops::gemm(c_.dev, H.qkv(A[kActQkv].ptr(), i), keys, H.scores(scores.ptr(), i, seen), false, true, 0);
  MH_SoftmaxArgs soft{};
  soft.x = scores.t({H.m * H.groups, s.count, seen});
  soft.out = soft.x;
  soft.scale = 1.0f / std::sqrt(float(H.D));
  c_.dev.run(&MH_KernelsApi::softmax, soft, "softmax");
  for (int64_t i = 0; i < H.m; ++i)
    ops::gemm(c_.dev, H.scores(scores.ptr(), i, seen), values, H.context(A[kActContext].ptr(), i), false, false, 0);
}

}  // namespace mh
