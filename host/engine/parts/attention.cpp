#include "engine/parts/attention.hpp"

#include <cmath>

#include "engine/ops.hpp"
#include "engine/parts/lora.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// Per-group strides of the QKV, scores and context buffers. The batched
// GEMMs run once per query head i of a group, each over all (sample,
// group) pairs: batch index b * groups + g.
struct Heads {
  int64_t groups, m, S, D, batch;

  explicit Heads(const ModelDims& d)
      : groups(d.local_kv_heads()), m(d.heads / d.kv()), S(d.seq), D(d.head_dim()),
        batch(d.micro_batch * d.local_kv_heads()) {}

  // Slot j of each group in QKV: query head j < m, then K (m), then V (m + 1).
  MH_Tensor qkv(TypedPtr p, int64_t j) const {
    return view((p + j * D).data, p.dtype, {batch, S, D}, {(m + 2) * D, batch * (m + 2) * D, 1});
  }
  // Query head i's [S, S] scores of every (sample, group): [b, a/t, s, s].
  MH_Tensor scores(TypedPtr p, int64_t i) const {
    return view((p + i * S * S).data, p.dtype, {batch, S, S}, {m * S * S, S, 1});
  }
  // Query head i's context, in the [s, b, a/t * D] rows of the projection's input.
  MH_Tensor context(TypedPtr p, int64_t i) const {
    return view((p + i * D).data, p.dtype, {batch, S, D}, {m * D, batch * m * D, 1});
  }
  int64_t score_elements() const { return batch * m * S * S; }
  // The attention op's 4-D views of the same buffers: q-like [batch, m, S,
  // D] (query heads, the context and their gradients) and k-like [batch,
  // S, D] (slot j = m: K, m + 1: V).
  MH_Tensor queries(TypedPtr qkv) const {
    return view(qkv.data, qkv.dtype, {batch, m, S, D}, {(m + 2) * D, D, batch * (m + 2) * D, 1});
  }
  MH_Tensor contexts(TypedPtr ctx) const { return view(ctx.data, ctx.dtype, {batch, m, S, D}, {m * D, D, batch * m * D, 1}); }
};

}  // namespace

void AttentionPart::forward(LayerActivations& A, const LayerParamIds& w, int64_t layer,
                            const LayerPass& pass) const {
  if (!A.has(MH_ACT_QKV)) {
    project(c_, A, w, lora_dropout(pass, layer));
    encode(A[MH_ACT_QKV].ptr(), pass, false);
  }
  core(A, pass, layer);
}

MH_RngSpan AttentionPart::probs_span(uint64_t key, int64_t layer) const {
  const uint64_t per_head = uint64_t(c_.d.seq * c_.d.seq);
  return MH_RngSpan{dropout_stream(key, layer, kDropoutSiteProbs), uint64_t(c_.d.tp_rank * c_.d.local_heads()) * per_head,
                    uint64_t(c_.d.local_heads()) * per_head, uint64_t(c_.d.heads) * per_head};
}

void AttentionPart::project(const PartContext& c, LayerActivations& A, const LayerParamIds& w,
                            const LoraDropout& drop) {
  const int64_t N = c.d.rows(), h = c.d.hidden, q = c.d.local_qkv();
  Buffer gathered;
  TypedPtr in = c.tp.enter_fwd(A[MH_ACT_LN1].ptr(), gathered);
  A[MH_ACT_QKV] = c.activation(kAct, N * q);
  ops::linear(c.dev, in, c.P(w.qkv_w), A[MH_ACT_QKV].ptr(), N, h, q);
  if (w.qkv_b >= 0) ops::bias_add(c.dev, A[MH_ACT_QKV].ptr(), c.P(w.qkv_b), N, q);
  lora_forward(c, w.qkv_lora, drop, kLoraQkv, in, A[MH_ACT_QKV].t({1, N, q}), h, q);
}

void AttentionPart::encode(TypedPtr qkv, const LayerPass& pass, bool inverse) const {
  const Heads H(c_.d);
  for (int64_t j = 0; j <= H.m; ++j) position_.encode(H.qkv(qkv, j), 0, pass.document_positions, inverse);
}

void AttentionPart::core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  const Heads H(c_.d);
  const int64_t n = H.score_elements();
  const TypedPtr qkv = A[MH_ACT_QKV].ptr();
  if (!A.has(MH_ACT_ATTN_SCORES)) {
    A[MH_ACT_ATTN_SCORES] = c_.activation(kAct, n);
    for (int64_t i = 0; i < H.m; ++i)
      ops::gemm(c_.dev, H.qkv(qkv, i), H.qkv(qkv, H.m), H.scores(A[MH_ACT_ATTN_SCORES].ptr(), i), false, true, 0);
    MH_SoftmaxArgs s{};
    s.x = A[MH_ACT_ATTN_SCORES].t({n / (H.S * H.S), H.S, H.S});
    s.out = s.x;
    s.scale = 1.0f / std::sqrt(float(H.D));
    s.starts = pass.document_starts;
    c_.dev.run(&MH_KernelsApi::softmax, s, "softmax");
  }
  if (!A.has(MH_ACT_ATTN_PROBS) || !A.has(MH_ACT_ATTN_MASK)) {
    A[MH_ACT_ATTN_PROBS] = c_.activation(kAct, n);
    A[MH_ACT_ATTN_MASK] = Buffer(c_.dev, kAct, n, MH_U8);
    ops::dropout(c_.dev, A[MH_ACT_ATTN_SCORES].ptr(), {}, A[MH_ACT_ATTN_PROBS].ptr(),
                 static_cast<uint8_t*>(A[MH_ACT_ATTN_MASK].data()), n, pass.attention_dropout,
                 probs_span(pass.key, layer));
  }
  if (!A.has(MH_ACT_CONTEXT)) {
    A[MH_ACT_CONTEXT] = c_.activation(kAct, c_.d.rows() * c_.d.local_hidden());
    for (int64_t i = 0; i < H.m; ++i)
      ops::gemm(c_.dev, H.scores(A[MH_ACT_ATTN_PROBS].ptr(), i), H.qkv(qkv, H.m + 1),
                H.context(A[MH_ACT_CONTEXT].ptr(), i), false, false, 0);
  }
}

void AttentionPart::backward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass,
                             TypedPtr dctx, Buffer& dx) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, q = c_.d.local_qkv();
  Buffer dqkv = c_.activation(kWork, N * q), gathered;
  core_bwd(A, pass, layer, dctx, dqkv.ptr());
  encode(dqkv.ptr(), pass, true);
  if (w.qkv_b >= 0) ops::bias_bwd(c_.dev, dqkv.ptr(), c_.G(w.qkv_b), N, q);
  TypedPtr in = c_.tp.enter_fwd(A[MH_ACT_LN1].ptr(), gathered);
  ops::linear_dw(c_.dev, dqkv.ptr(), in, c_.G(w.qkv_w), N, h, q);
  ops::linear_dx(c_.dev, dqkv.ptr(), c_.P(w.qkv_w), dx.f32(), N, h, q);
  lora_backward(c_, w.qkv_lora, lora_dropout(pass, layer), kLoraQkv, in, dqkv.t({1, N, q}), dx.ptr(), h, q);
}

// A group's K and V serve its m query heads, so their gradients sum over
// the heads: the first head's GEMM writes, the others accumulate.
void AttentionPart::core_bwd(LayerActivations& A, const LayerPass& pass, int64_t, TypedPtr dctx, TypedPtr dqkv) const {
  const Heads H(c_.d);
  const int64_t n = H.score_elements();
  const TypedPtr qkv = A[MH_ACT_QKV].ptr(), probs = A[MH_ACT_ATTN_PROBS].ptr();
  Buffer dprobs = c_.activation(kWork, n);
  const TypedPtr dp = dprobs.ptr();
  for (int64_t i = 0; i < H.m; ++i) {
    const MH_Tensor dc = H.context(dctx, i);
    ops::gemm(c_.dev, dc, H.qkv(qkv, H.m + 1), H.scores(dp, i), false, true, 0);                   // dP = dC V^T
    ops::gemm(c_.dev, H.scores(probs, i), dc, H.qkv(dqkv, H.m + 1), true, false, i > 0 ? 1.f : 0.f);  // dV += P^T dC
  }
  ops::dropout_bwd(c_.dev, dp, static_cast<uint8_t*>(A[MH_ACT_ATTN_MASK].data()), dp, n, c_.d.attention_dropout);
  MH_SoftmaxArgs s{};
  s.out = A[MH_ACT_ATTN_SCORES].t({n / (H.S * H.S), H.S, H.S});
  s.dout = dprobs.t({n / (H.S * H.S), H.S, H.S});
  s.dx = s.dout;
  s.scale = 1.0f / std::sqrt(float(H.D));
  s.starts = pass.document_starts;
  c_.dev.run(&MH_KernelsApi::softmax_bwd, s, "softmax_bwd");
  for (int64_t i = 0; i < H.m; ++i) {
    ops::gemm(c_.dev, H.scores(dp, i), H.qkv(qkv, H.m), H.qkv(dqkv, i), false, false, 0);                  // dQ = dS K
    ops::gemm(c_.dev, H.scores(dp, i), H.qkv(qkv, i), H.qkv(dqkv, H.m), true, false, i > 0 ? 1.f : 0.f);  // dK += dS^T Q
  }
}

// The flash core keeps, beside QKV and the context, 4 bytes of log-sum-exp
// per query row and head (4asb/t) where the unfused one keeps the scores,
// probabilities and mask ((2e + 1) as^2b/t): linear in s instead of
// quadratic.
double AttentionPart::activation_bytes(const ModelDims& d, double e, MH_Activation a) {
  const double s = double(d.seq), b = double(d.micro_batch), t = double(d.tp);
  const double sbh = s * b * double(d.hidden), as2b = double(d.heads) * s * s * b;
  const double kv_share = double(d.kv()) / double(d.heads);
  const bool flash = d.spec.attention_backend == AttentionBackend::kFlash;
  switch (a) {
    case MH_ACT_QKV: return (1 + 2 * kv_share) * e * sbh / t;
    case MH_ACT_CONTEXT: return e * sbh / t + (flash ? 4 * double(d.heads) * s * b / t : 0);
    case MH_ACT_ATTN_SCORES:
    case MH_ACT_ATTN_PROBS: return flash ? 0 : e * as2b / t;
    case MH_ACT_ATTN_MASK: return flash ? 0 : as2b / t;
    default: return 0;
  }
}

int64_t FlashAttentionPart::lse_offset(const ModelDims& d, int32_t dtype) {
  const int64_t e = int64_t(dtype_size(dtype));
  return (d.rows() * d.local_hidden() * e + 3) / 4 * 4 / e;
}

MH_AttentionArgs FlashAttentionPart::args(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  const Heads H(c_.d);
  const TypedPtr qkv = A[MH_ACT_QKV].ptr(), ctx = A[MH_ACT_CONTEXT].ptr();
  MH_AttentionArgs a{};
  a.q = H.queries(qkv);
  a.k = H.qkv(qkv, H.m);
  a.v = H.qkv(qkv, H.m + 1);
  a.out = H.contexts(ctx);
  a.lse = view((ctx + lse_offset(c_.d, ctx.dtype)).data, MH_F32, {H.batch, H.m, H.S});
  a.starts = pass.document_starts;
  a.scale = 1.0f / std::sqrt(float(H.D));
  a.dropout_p = pass.attention_dropout;
  a.rng = probs_span(pass.key, layer);
  return a;
}

void FlashAttentionPart::core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  if (A.has(MH_ACT_CONTEXT)) return;
  const int32_t dtype = c_.dev.info().compute_dtype;
  const int64_t lse_bytes = Heads(c_.d).batch * Heads(c_.d).m * c_.d.seq * 4, e = int64_t(dtype_size(dtype));
  A[MH_ACT_CONTEXT] = Buffer(c_.dev, kAct, lse_offset(c_.d, dtype) + lse_bytes / e, dtype);
  c_.dev.run(&MH_KernelsApi::attention, args(A, pass, layer), "attention");
}

// The op accumulates into dq, dk and dv (a ring adds key blocks), so dqkv
// starts at zero.
void FlashAttentionPart::core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                                  TypedPtr dqkv) const {
  const Heads H(c_.d);
  ops::fill(c_.dev, dqkv, c_.d.rows() * c_.d.local_qkv(), 0.0f);
  MH_AttentionArgs a = args(A, pass, layer);
  a.dout = H.contexts(dctx);
  a.dq = H.queries(dqkv);
  a.dk = H.qkv(dqkv, H.m);
  a.dv = H.qkv(dqkv, H.m + 1);
  c_.dev.run(&MH_KernelsApi::attention_bwd, a, "attention_bwd");
}

}  // namespace mh
