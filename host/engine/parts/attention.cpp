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
};

// QK-norm (Qwen3) over the query heads and the key head of every group:
// slot j of QKV's rows is the view [rows k/t, D] with row stride (m + 2) D.
// The m query slots, then the key slot, are gathered into contiguous rows,
// as the norm kernels read them, and scattered back.
struct QkHeads {
  int64_t n, D, m;

  explicit QkHeads(const ModelDims& d) : n(d.rows() * d.local_kv_heads()), D(d.head_dim()), m(d.heads / d.kv()) {}
  MH_Tensor slot(TypedPtr qkv, int64_t j) const {
    return view((qkv + j * D).data, qkv.dtype, {1, n, D}, {0, (m + 2) * D, 1});
  }
  MH_Tensor rows(TypedPtr p, int64_t j) const { return view((p + j * n * D).data, p.dtype, {1, n, D}, {0, D, 1}); }
  int64_t elements() const { return (m + 1) * n * D; }

  Buffer gather(const PartContext& c, TypedPtr qkv) const {
    Buffer out = c.activation(kWork, elements());
    for (int64_t j = 0; j <= m; ++j) ops::strided_copy(c.dev, slot(qkv, j), rows(out.ptr(), j));
    return out;
  }
  void scatter(const PartContext& c, TypedPtr heads, TypedPtr qkv) const {
    for (int64_t j = 0; j <= m; ++j) ops::strided_copy(c.dev, rows(heads, j), slot(qkv, j));
  }
};

// The norm kernels read an f32 scale; under mixed precision the weight is
// the compute-dtype copy, widened here.
const float* f32_scale(const PartContext& c, int id, Buffer& staged) {
  const TypedPtr p = c.P(id);
  if (p.dtype == MH_F32) return static_cast<const float*>(p.data);
  staged = Buffer(c.dev, kWork, c.d.head_dim());
  ops::copy(c.dev, p, staged.ptr(), c.d.head_dim());
  return staged.f32();
}

// rstd f32 [(m + 1) n]; out = the normed heads of x (both gathered).
void qk_norm(const PartContext& c, const QkHeads& H, const LayerParamIds& w, TypedPtr x, TypedPtr out, float* rstd) {
  Buffer q_scale, k_scale;
  const float eps = c.d.layernorm_eps;
  ops::rmsnorm(c.dev, x, f32_scale(c, w.q_norm_w, q_scale), out, rstd, H.m * H.n, H.D, eps);
  ops::rmsnorm(c.dev, x + H.m * H.n * H.D, f32_scale(c, w.k_norm_w, k_scale), out + H.m * H.n * H.D,
               rstd + H.m * H.n, H.n, H.D, eps);
}

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

void AttentionPart::linear_qkv(const PartContext& c, TypedPtr in, const LayerParamIds& w, const LoraDropout& drop,
                               TypedPtr out) {
  const int64_t N = c.d.rows(), h = c.d.hidden, q = c.d.local_qkv();
  ops::linear(c.dev, in, c.P(w.qkv_w), out, N, h, q);
  if (w.qkv_b >= 0) ops::bias_add(c.dev, out, c.P(w.qkv_b), N, q);
  lora_forward(c, w.qkv_lora, drop, kLoraQkv, in, out.t({1, N, q}), h, q);
}

void AttentionPart::project(const PartContext& c, LayerActivations& A, const LayerParamIds& w,
                            const LoraDropout& drop) {
  Buffer gathered;
  TypedPtr in = c.tp.enter_fwd(A[MH_ACT_LN1].ptr(), gathered);
  A[MH_ACT_QKV] = c.activation(kAct, c.d.rows() * c.d.local_qkv());
  linear_qkv(c, in, w, drop, A[MH_ACT_QKV].ptr());
  if (w.q_norm_w < 0) return;
  const QkHeads H(c.d);
  Buffer x = H.gather(c, A[MH_ACT_QKV].ptr()), y = c.activation(kWork, H.elements());
  Buffer rstd(c.dev, kWork, (H.m + 1) * H.n);
  qk_norm(c, H, w, x.ptr(), y.ptr(), rstd.f32());
  H.scatter(c, y.ptr(), A[MH_ACT_QKV].ptr());
}

void AttentionPart::qk_norm_bwd(TypedPtr in, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dqkv) const {
  const QkHeads H(c_.d);
  Buffer pre = c_.activation(kWork, c_.d.rows() * c_.d.local_qkv());
  linear_qkv(c_, in, w, drop, pre.ptr());
  Buffer x = H.gather(c_, pre.ptr());
  pre.release();
  Buffer y = c_.activation(kWork, H.elements()), rstd(c_.dev, kWork, (H.m + 1) * H.n);
  qk_norm(c_, H, w, x.ptr(), y.ptr(), rstd.f32());
  Buffer dy = H.gather(c_, dqkv), dx(c_.dev, kWork, H.elements());
  ops::fill(c_.dev, dx.ptr(), H.elements(), 0);
  struct Block {
    int weight;
    int64_t first, count;  // rows of the gathered heads
  };
  for (const Block& b : {Block{w.q_norm_w, 0, H.m * H.n}, Block{w.k_norm_w, H.m * H.n, H.n}}) {
    Buffer scale, discarded;
    float* dw = c_.G(b.weight);
    if (dw == nullptr) {  // a frozen norm's gradient goes to scratch
      discarded = Buffer(c_.dev, kWork, H.D);
      ops::fill(c_.dev, discarded.ptr(), H.D, 0);
      dw = discarded.f32();
    }
    ops::rmsnorm_bwd(c_.dev, dy.ptr() + b.first * H.D, x.ptr() + b.first * H.D, f32_scale(c_, b.weight, scale),
                     rstd.f32() + b.first, dx.f32() + b.first * H.D, dw, b.count, H.D);
  }
  ops::copy(c_.dev, dx.ptr(), y.ptr(), H.elements());
  H.scatter(c_, y.ptr(), dqkv);
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
  core_bwd(A, pass, dctx, dqkv.ptr());
  encode(dqkv.ptr(), pass, true);
  TypedPtr in = c_.tp.enter_fwd(A[MH_ACT_LN1].ptr(), gathered);
  if (w.q_norm_w >= 0) qk_norm_bwd(in, w, lora_dropout(pass, layer), dqkv.ptr());
  if (w.qkv_b >= 0) ops::bias_bwd(c_.dev, dqkv.ptr(), c_.G(w.qkv_b), N, q);
  ops::linear_dw(c_.dev, dqkv.ptr(), in, c_.G(w.qkv_w), N, h, q);
  ops::linear_dx(c_.dev, dqkv.ptr(), c_.P(w.qkv_w), dx.f32(), N, h, q);
  lora_backward(c_, w.qkv_lora, lora_dropout(pass, layer), kLoraQkv, in, dqkv.t({1, N, q}), dx.ptr(), h, q);
}

// A group's K and V serve its m query heads, so their gradients sum over
// the heads: the first head's GEMM writes, the others accumulate.
void AttentionPart::core_bwd(LayerActivations& A, const LayerPass& pass, TypedPtr dctx, TypedPtr dqkv) const {
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

double AttentionPart::activation_bytes(const ModelDims& d, double e, MH_Activation a) {
  const double s = double(d.seq), b = double(d.micro_batch), t = double(d.tp);
  const double sbh = s * b * double(d.hidden), as2b = double(d.heads) * s * s * b;
  const double kv_share = double(d.kv()) / double(d.heads);
  switch (a) {
    case MH_ACT_QKV: return (1 + 2 * kv_share) * e * sbh / t;
    case MH_ACT_CONTEXT: return e * sbh / t;
    case MH_ACT_ATTN_SCORES:
    case MH_ACT_ATTN_PROBS: return e * as2b / t;
    case MH_ACT_ATTN_MASK: return as2b / t;
    default: return 0;
  }
}

}  // namespace mh
