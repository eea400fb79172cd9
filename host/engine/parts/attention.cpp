#include "engine/parts/attention.hpp"

#include <cmath>
#include <vector>

#include "engine/ops.hpp"
#include "engine/parts/lora.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// Per-group strides of the QKV, scores and context buffers. The batched
// GEMMs run once per query head i of a group, each over all (sample,
// group) pairs: batch index b * groups + g. S is the rank's positions (s/cp).
struct Heads {
  int64_t groups, m, S, D, batch;

  explicit Heads(const ModelDims& d)
      : groups(d.local_kv_heads()), m(d.heads / d.kv()), S(d.local_seq()), D(d.head_dim()),
        batch(d.micro_batch * d.local_kv_heads()) {}

  // Slot j of each group in QKV: query head j < m, then K (m), then V (m +
  // 1); `rows` positions from local position `first`.
  MH_Tensor qkv(TypedPtr p, int64_t j, int64_t first, int64_t rows) const {
    return view((p + first * batch * (m + 2) * D + j * D).data, p.dtype, {batch, rows, D},
                {(m + 2) * D, batch * (m + 2) * D, 1});
  }
  MH_Tensor qkv(TypedPtr p, int64_t j) const { return qkv(p, j, 0, S); }
  // K and V side by side, [batch, S, 2D]: what context parallelism exchanges.
  MH_Tensor kv(TypedPtr p) const {
    return view((p + m * D).data, p.dtype, {batch, S, 2 * D}, {(m + 2) * D, batch * (m + 2) * D, 1});
  }
  // Query head i's [S, S] scores of every (sample, group): [b, a/t, s, s].
  MH_Tensor scores(TypedPtr p, int64_t i) const {
    return view((p + i * S * S).data, p.dtype, {batch, S, S}, {m * S * S, S, 1});
  }
  // Query head i's context, in the [s, b, a/t * D] rows of the projection's input.
  MH_Tensor context(TypedPtr p, int64_t i, int64_t first, int64_t rows) const {
    return view((p + first * batch * m * D + i * D).data, p.dtype, {batch, rows, D}, {m * D, batch * m * D, 1});
  }
  MH_Tensor context(TypedPtr p, int64_t i) const { return context(p, i, 0, S); }
  int64_t score_elements() const { return batch * m * S * S; }
  // The attention op's 4-D views of the same buffers: q-like [batch, m, S,
  // D] (query heads, the context and their gradients) and k-like [batch,
  // S, D] (slot j = m: K, m + 1: V).
  // `rows` positions from local position `first`.
  MH_Tensor queries(TypedPtr qkv, int64_t first, int64_t rows) const {
    return view((qkv + first * batch * (m + 2) * D).data, qkv.dtype, {batch, m, rows, D},
                {(m + 2) * D, D, batch * (m + 2) * D, 1});
  }
  MH_Tensor queries(TypedPtr qkv) const { return queries(qkv, 0, S); }
  MH_Tensor contexts(TypedPtr ctx, int64_t first, int64_t rows) const {
    return view((ctx + first * batch * m * D).data, ctx.dtype, {batch, m, rows, D}, {m * D, D, batch * m * D, 1});
  }
  MH_Tensor contexts(TypedPtr ctx) const { return contexts(ctx, 0, S); }
};

// Context parallelism's view of attention: the rank's chunk k of c queries,
// at global positions [p_k, p_k + c), attends to the T_k = p_k + c keys
// before it: the last c rows of causal [T_k, T_k] scores, which softmax
// takes as partial scores [G, c, T_k] (abi.h, MH_SoftmaxArgs). Keys and
// values are the whole sequence's, gathered [s, b * groups, 2D].
struct Chunks {
  const ModelDims& d;
  Heads H;

  explicit Chunks(const ModelDims& dims) : d(dims), H(dims) {}

  int64_t c() const { return d.chunk_len(); }
  int64_t T(int64_t k) const { return d.chunk_start(k) + c(); }
  // Chunk k's scores [b * groups, m, c, T_k] start after the earlier chunks'.
  int64_t offset(int64_t k) const {
    int64_t before = 0;
    for (int64_t j = 0; j < k; ++j) before += T(j);
    return H.batch * H.m * c() * before;
  }
  MH_Tensor scores(TypedPtr p, int64_t k, int64_t i) const {
    return view((p + offset(k) + i * c() * T(k)).data, p.dtype, {H.batch, c(), T(k)}, {H.m * c() * T(k), T(k), 1});
  }
  MH_Tensor all_scores(TypedPtr p, int64_t k) const { return (p + offset(k)).t({H.batch * H.m, c(), T(k)}); }
  // The first T_k gathered keys (j = 0) or values (j = 1).
  MH_Tensor gathered(TypedPtr kv, int64_t j, int64_t k) const {
    return view((kv + j * H.D).data, kv.dtype, {H.batch, T(k), H.D}, {2 * H.D, H.batch * 2 * H.D, 1});
  }
  MH_Tensor queries(TypedPtr qkv, int64_t i, int64_t k) const { return H.qkv(qkv, i, k * c(), c()); }
  MH_Tensor context(TypedPtr ctx, int64_t i, int64_t k) const { return H.context(ctx, i, k * c(), c()); }
  int64_t score_elements() const { return offset(d.chunks()); }
  // Elements of one chunk's keys and values, [c, b * groups, 2D].
  int64_t kv_chunk() const { return c() * H.batch * 2 * H.D; }
  // A rank's keys and values in a contiguous block [s/cp, b * groups, 2D],
  // as the exchanges pass them.
  MH_Tensor local_kv(TypedPtr kv) const {
    return view(kv.data, kv.dtype, {H.batch, H.S, 2 * H.D}, {2 * H.D, H.batch * 2 * H.D, 1});
  }
  // The keys (j = 0) or values (j = 1) of chunk `chunk` of a rank's block
  // [s/cp, b * groups, 2D].
  MH_Tensor block(TypedPtr kv, int64_t j, int64_t chunk) const {
    return view((kv + chunk * kv_chunk() + j * H.D).data, kv.dtype, {H.batch, c(), H.D},
                {2 * H.D, H.batch * 2 * H.D, 1});
  }
};

// Ulysses' all-to-all over the context group for a buffer whose rows (the
// rank's [s/cp, b] positions, its chunks in local order) hold cp equal
// slices of w elements, slice r the key/value groups (with their heads) of
// context rank r: to_heads gives every rank its slice of every position,
// [s, b, w] in global position order; to_sequence is the inverse. Both are
// permutations: exact in every dtype.
struct HeadExchange {
  const PartContext& c;
  int64_t w;

  int64_t rows() const { return c.d.rows(); }
  int64_t chunk() const { return c.d.chunk_len() * c.d.micro_batch * w; }
  // Slice r of the local rows [rows, cp w], and block r of the exchange
  // buffer [cp, rows, w].
  MH_Tensor slice(TypedPtr p, int32_t r) const {
    return view((p + r * w).data, p.dtype, {1, rows(), w}, {0, c.d.cp * w, 1});
  }
  MH_Tensor block(TypedPtr p, int32_t r) const {
    return view((p + r * rows() * w).data, p.dtype, {1, rows(), w}, {0, w, 1});
  }
  void exchange(TypedPtr send, TypedPtr recv) const {
    const std::vector<int64_t> counts(size_t(c.d.cp), rows() * w);
    c.context->all_to_all(send, counts, recv, counts);
  }

  // in [rows, cp w] (local positions) -> out [s b, w] (global positions).
  void to_heads(TypedPtr in, TypedPtr out) const {
    Buffer send = c.activation(kWork, c.d.cp * rows() * w), recv = c.activation(kWork, c.d.cp * rows() * w);
    for (int32_t r = 0; r < c.d.cp; ++r) ops::strided_copy(c.dev, slice(in, r), block(send.ptr(), r));
    exchange(send.ptr(), recv.ptr());
    for (int32_t r = 0; r < c.d.cp; ++r)
      for (int64_t k = 0; k < c.d.chunks(); ++k)
        ops::copy(c.dev, recv.ptr() + r * rows() * w + k * chunk(), out + c.d.chunk_index(r, k) * chunk(), chunk());
  }
  Buffer to_heads(TypedPtr in) const {
    Buffer out = c.activation(kWork, c.d.cp * rows() * w);
    to_heads(in, out.ptr());
    return out;
  }
  // in [s b, w] (global positions) -> out [rows, cp w] (local positions).
  void to_sequence(TypedPtr in, TypedPtr out) const {
    Buffer send = c.activation(kWork, c.d.cp * rows() * w), recv = c.activation(kWork, c.d.cp * rows() * w);
    for (int32_t r = 0; r < c.d.cp; ++r)
      for (int64_t k = 0; k < c.d.chunks(); ++k)
        ops::copy(c.dev, in + c.d.chunk_index(r, k) * chunk(), send.ptr() + r * rows() * w + k * chunk(), chunk());
    exchange(send.ptr(), recv.ptr());
    for (int32_t r = 0; r < c.d.cp; ++r) ops::strided_copy(c.dev, block(recv.ptr(), r), slice(out, r));
  }
};

// The core's own activations, which Ulysses' core keeps head-sharded.
constexpr Activation kCoreActivations[] = {kActAttnScores, kActAttnProbs, kActAttnMask};

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
  if (!A.has(kActQkv)) {
    project(c_, A, w, lora_dropout(pass, layer));
    encode(A[kActQkv].ptr(), pass, false);
  }
  if (heads_) return ulysses_core(A, pass, layer);
  core(A, pass, layer);
}

ModelDims head_sharded(const ModelDims& d) {
  ModelDims h = d;
  h.tp = d.tp * d.cp;
  h.tp_rank = d.tp_rank * d.cp + d.cp_rank;
  h.sp = false;
  h.cp = 1;
  h.cp_rank = 0;
  h.cp_balanced = false;
  return h;
}

AttentionPart::HeadShards::HeadShards(const PartContext& outer)
    : d(head_sharded(outer.d)), c{outer.dev, outer.params, outer.tp, d} {}

void AttentionPart::shard_heads(const std::function<std::unique_ptr<AttentionPart>(const PartContext&)>& make) {
  heads_ = std::make_unique<HeadShards>(c_);
  heads_->core = make(heads_->c);
}

void AttentionPart::ulysses_core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  bool complete = A.has(kActContext);
  for (Activation a : kCoreActivations) complete = complete && (activation_bytes(c_.d, 1, a) == 0 || A.has(a));
  if (complete) return;
  const HeadExchange qkv{c_, c_.d.local_qkv() / c_.d.cp}, ctx{c_, c_.d.local_attention() / c_.d.cp};
  LayerActivations I;
  I[kActQkv] = qkv.to_heads(A[kActQkv].ptr());
  for (Activation a : kCoreActivations) I[a] = std::move(A[a]);
  if (A.has(kActContext)) {
    I[kActContext] = std::move(A[kActContext]);
    Buffer heads = ctx.to_heads(I[kActContext].ptr());
    ops::copy(c_.dev, heads.ptr(), I[kActContext].ptr(), heads.numel());
  }
  heads_->core->core(I, pass, layer);
  for (Activation a : kCoreActivations) A[a] = std::move(I[a]);
  // The context goes back to the rank's positions in place; a flash
  // core's log-sum-exp behind it stays head-sharded, as its backward reads it.
  Buffer heads = c_.activation(kWork, c_.d.rows() * c_.d.local_attention());
  ops::copy(c_.dev, I[kActContext].ptr(), heads.ptr(), heads.numel());
  ctx.to_sequence(heads.ptr(), I[kActContext].ptr());
  A[kActContext] = std::move(I[kActContext]);
}

void AttentionPart::ulysses_core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                                     TypedPtr dqkv) const {
  const HeadExchange qkv{c_, c_.d.local_qkv() / c_.d.cp}, ctx{c_, c_.d.local_attention() / c_.d.cp};
  LayerActivations I;
  I[kActQkv] = qkv.to_heads(A[kActQkv].ptr());
  for (Activation a : kCoreActivations) I[a] = std::move(A[a]);
  if (heads_->core->backward_reads_context()) {
    // The head-sharded context with whatever follows it (the log-sum-exp).
    const Buffer& kept = A[kActContext];
    const int64_t n = c_.d.rows() * c_.d.local_attention();
    I[kActContext] = Buffer(c_.dev, kWork, kept.numel(), kept.dtype());
    ctx.to_heads(kept.ptr(), I[kActContext].ptr());
    ops::copy(c_.dev, kept.ptr() + n, I[kActContext].ptr() + n, kept.numel() - n);
  }
  const Buffer dctx_heads = ctx.to_heads(dctx);
  Buffer dqkv_heads = c_.activation(kWork, c_.d.rows() * c_.d.local_qkv());
  heads_->core->core_bwd(I, pass, layer, dctx_heads.ptr(), dqkv_heads.ptr());
  for (Activation a : kCoreActivations) A[a] = std::move(I[a]);
  qkv.to_sequence(dqkv_heads.ptr(), dqkv);
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
  TypedPtr in = c.tp.enter_fwd(A[kActLn1].ptr(), gathered);
  A[kActQkv] = c.activation(kAct, c.d.rows() * c.d.local_qkv());
  linear_qkv(c, in, w, drop, A[kActQkv].ptr());
  if (w.q_norm_w < 0) return;
  const QkHeads H(c.d);
  Buffer x = H.gather(c, A[kActQkv].ptr()), y = c.activation(kWork, H.elements());
  Buffer rstd(c.dev, kWork, (H.m + 1) * H.n);
  qk_norm(c, H, w, x.ptr(), y.ptr(), rstd.f32());
  H.scatter(c, y.ptr(), A[kActQkv].ptr());
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

// Each chunk of the rank's positions from its global position.
void AttentionPart::encode(TypedPtr qkv, const LayerPass& pass, bool inverse) const {
  const Heads H(c_.d);
  const int64_t c = c_.d.chunk_len();
  for (int64_t k = 0; k < c_.d.chunks(); ++k)
    for (int64_t j = 0; j <= H.m; ++j)
      position_.encode(H.qkv(qkv, j, k * c, c), c_.d.chunk_start(k), pass.document_positions, inverse);
}

void AttentionPart::core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  if (c_.d.cp > 1) return context_core(A, pass, layer);
  const Heads H(c_.d);
  const int64_t n = H.score_elements();
  const TypedPtr qkv = A[kActQkv].ptr();
  if (!A.has(kActAttnScores)) {
    A[kActAttnScores] = c_.activation(kAct, n);
    for (int64_t i = 0; i < H.m; ++i)
      ops::gemm(c_.dev, H.qkv(qkv, i), H.qkv(qkv, H.m), H.scores(A[kActAttnScores].ptr(), i), false, true, 0);
    MH_SoftmaxArgs s{};
    s.x = A[kActAttnScores].t({n / (H.S * H.S), H.S, H.S});
    s.out = s.x;
    s.scale = 1.0f / std::sqrt(float(H.D));
    s.starts = pass.document_starts;
    c_.dev.run(&MH_KernelsApi::softmax, s, "softmax");
  }
  if (!A.has(kActAttnProbs) || !A.has(kActAttnMask)) {
    A[kActAttnProbs] = c_.activation(kAct, n);
    A[kActAttnMask] = Buffer(c_.dev, kAct, n, MH_U8);
    ops::dropout(c_.dev, A[kActAttnScores].ptr(), {}, A[kActAttnProbs].ptr(),
                 static_cast<uint8_t*>(A[kActAttnMask].data()), n, pass.attention_dropout,
                 probs_span(pass.key, layer));
  }
  if (!A.has(kActContext)) {
    A[kActContext] = c_.activation(kAct, c_.d.rows() * c_.d.local_attention());
    for (int64_t i = 0; i < H.m; ++i)
      ops::gemm(c_.dev, H.scores(A[kActAttnProbs].ptr(), i), H.qkv(qkv, H.m + 1),
                H.context(A[kActContext].ptr(), i), false, false, 0);
  }
}

Buffer AttentionPart::gather_kv(TypedPtr qkv) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const int64_t chunk = C.kv_chunk(), local = chunk * c_.d.chunks();
  Buffer kv = c_.activation(kWork, c_.d.cp * local);
  {
    Buffer mine = c_.activation(kWork, local), all = c_.activation(kWork, c_.d.cp * local);
    ops::strided_copy(c_.dev, H.kv(qkv), C.local_kv(mine.ptr()));
    c_.context->all_gather(mine.ptr(), all.ptr(), local);
    for (int32_t r = 0; r < c_.d.cp; ++r)
      for (int64_t k = 0; k < c_.d.chunks(); ++k)
        ops::copy(c_.dev, all.ptr() + r * local + k * chunk, kv.ptr() + c_.d.chunk_index(r, k) * chunk, chunk);
  }
  return kv;
}

void AttentionPart::scatter_dkv(TypedPtr dkv, TypedPtr dqkv) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const int64_t chunk = C.kv_chunk(), local = chunk * c_.d.chunks();
  Buffer ordered(c_.dev, kWork, c_.d.cp * local, MH_F32), mine(c_.dev, kWork, local, MH_F32);
  for (int32_t r = 0; r < c_.d.cp; ++r)
    for (int64_t k = 0; k < c_.d.chunks(); ++k)
      ops::copy(c_.dev, dkv + c_.d.chunk_index(r, k) * chunk, ordered.ptr() + r * local + k * chunk, chunk);
  c_.context->reduce_scatter(ordered.ptr(), mine.ptr(), local);
  Buffer back = c_.activation(kWork, local);
  ops::copy(c_.dev, mine.ptr(), back.ptr(), local);
  ops::strided_copy(c_.dev, C.local_kv(back.ptr()), H.kv(dqkv));
}

// One rank's rows of attention with dropout: its chunks' scores against
// the gathered keys, the dropout stream at each probability's global
// [b, head, row, col] counter, as one rank draws it.
void AttentionPart::context_core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const int64_t n = C.score_elements(), S = c_.d.seq, lh = c_.d.local_heads();
  const TypedPtr qkv = A[kActQkv].ptr();
  Buffer kv;
  if (!A.has(kActAttnScores) || !A.has(kActContext)) kv = gather_kv(qkv);
  if (!A.has(kActAttnScores)) {
    A[kActAttnScores] = c_.activation(kAct, n);
    const TypedPtr scores = A[kActAttnScores].ptr();
    for (int64_t k = 0; k < c_.d.chunks(); ++k) {
      for (int64_t i = 0; i < H.m; ++i)
        ops::gemm(c_.dev, C.queries(qkv, i, k), C.gathered(kv.ptr(), 0, k), C.scores(scores, k, i), false, true, 0);
      MH_SoftmaxArgs s{};
      s.x = s.out = C.all_scores(scores, k);
      s.scale = 1.0f / std::sqrt(float(H.D));
      c_.dev.run(&MH_KernelsApi::softmax, s, "softmax");
    }
  }
  if (!A.has(kActAttnProbs) || !A.has(kActAttnMask)) {
    A[kActAttnProbs] = c_.activation(kAct, n);
    A[kActAttnMask] = Buffer(c_.dev, kAct, n, MH_U8);
    const uint64_t stream = dropout_stream(pass.key, layer, kDropoutSiteProbs);
    for (int64_t k = 0; k < c_.d.chunks(); ++k)
      for (int64_t b = 0; b < c_.d.micro_batch; ++b)
        for (int64_t j = 0; j < lh; ++j) {
          const int64_t at = C.offset(k) + (b * lh + j) * C.c() * C.T(k), head = c_.d.tp_rank * lh + j;
          const MH_RngSpan span{stream, uint64_t(((b * c_.d.heads + head) * S + c_.d.chunk_start(k)) * S),
                                uint64_t(C.T(k)), uint64_t(S)};
          ops::dropout(c_.dev, A[kActAttnScores].ptr() + at, {}, A[kActAttnProbs].ptr() + at,
                       static_cast<uint8_t*>(A[kActAttnMask].data()) + at, C.c() * C.T(k), pass.attention_dropout,
                       span);
        }
  }
  if (!A.has(kActContext)) {
    A[kActContext] = c_.activation(kAct, c_.d.rows() * c_.d.local_attention());
    for (int64_t k = 0; k < c_.d.chunks(); ++k)
      for (int64_t i = 0; i < H.m; ++i)
        ops::gemm(c_.dev, C.scores(A[kActAttnProbs].ptr(), k, i), C.gathered(kv.ptr(), 1, k),
                  C.context(A[kActContext].ptr(), i, k), false, false, 0);
  }
}

// Keys and values serve every later query of every rank: their gradients
// sum over the rank's chunks and heads into the gathered layout, then over
// the ranks as each reduce-scatters them back to their owners.
void AttentionPart::context_core_bwd(LayerActivations& A, TypedPtr dctx, TypedPtr dqkv) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const int64_t n = C.score_elements();
  const TypedPtr qkv = A[kActQkv].ptr(), probs = A[kActAttnProbs].ptr(), scores = A[kActAttnScores].ptr();
  Buffer kv = gather_kv(qkv), dkv = c_.activation(kWork, c_.d.cp * C.kv_chunk() * c_.d.chunks());
  ops::fill(c_.dev, dkv.ptr(), c_.d.cp * C.kv_chunk() * c_.d.chunks(), 0);
  Buffer dprobs = c_.activation(kWork, n);
  const TypedPtr dp = dprobs.ptr();
  for (int64_t k = 0; k < c_.d.chunks(); ++k)
    for (int64_t i = 0; i < H.m; ++i) {
      const MH_Tensor dc = C.context(dctx, i, k);
      ops::gemm(c_.dev, dc, C.gathered(kv.ptr(), 1, k), C.scores(dp, k, i), false, true, 0);        // dP = dC V^T
      ops::gemm(c_.dev, C.scores(probs, k, i), dc, C.gathered(dkv.ptr(), 1, k), true, false, 1.f);  // dV += P^T dC
    }
  ops::dropout_bwd(c_.dev, dp, static_cast<uint8_t*>(A[kActAttnMask].data()), dp, n, c_.d.attention_dropout);
  for (int64_t k = 0; k < c_.d.chunks(); ++k) {
    MH_SoftmaxArgs s{};
    s.out = C.all_scores(scores, k);
    s.dout = s.dx = C.all_scores(dp, k);
    s.scale = 1.0f / std::sqrt(float(H.D));
    c_.dev.run(&MH_KernelsApi::softmax_bwd, s, "softmax_bwd");
    for (int64_t i = 0; i < H.m; ++i) {
      ops::gemm(c_.dev, C.scores(dp, k, i), C.gathered(kv.ptr(), 0, k), C.queries(dqkv, i, k), false, false, 0);  // dQ = dS K
      ops::gemm(c_.dev, C.scores(dp, k, i), C.queries(qkv, i, k), C.gathered(dkv.ptr(), 0, k), true, false, 1.f);  // dK += dS^T Q
    }
  }
  scatter_dkv(dkv.ptr(), dqkv);
}

void AttentionPart::backward(LayerActivations& A, const LayerParamIds& w, int64_t layer, const LayerPass& pass,
                             TypedPtr dctx, Buffer& dx) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, q = c_.d.local_qkv();
  Buffer dqkv = c_.activation(kWork, N * q), gathered;
  if (heads_)
    ulysses_core_bwd(A, pass, layer, dctx, dqkv.ptr());
  else
    core_bwd(A, pass, layer, dctx, dqkv.ptr());
  encode(dqkv.ptr(), pass, true);
  TypedPtr in = c_.tp.enter_fwd(A[kActLn1].ptr(), gathered);
  if (w.q_norm_w >= 0) qk_norm_bwd(in, w, lora_dropout(pass, layer), dqkv.ptr());
  if (w.qkv_b >= 0) ops::bias_bwd(c_.dev, dqkv.ptr(), c_.G(w.qkv_b), N, q);
  ops::linear_dw(c_.dev, dqkv.ptr(), in, c_.G(w.qkv_w), N, h, q);
  ops::linear_dx(c_.dev, dqkv.ptr(), c_.P(w.qkv_w), dx.f32(), N, h, q);
  lora_backward(c_, w.qkv_lora, lora_dropout(pass, layer), kLoraQkv, in, dqkv.t({1, N, q}), dx.ptr(), h, q);
}

// A group's K and V serve its m query heads, so their gradients sum over
// the heads: the first head's GEMM writes, the others accumulate.
void AttentionPart::core_bwd(LayerActivations& A, const LayerPass& pass, int64_t, TypedPtr dctx, TypedPtr dqkv) const {
  if (c_.d.cp > 1) return context_core_bwd(A, dctx, dqkv);
  const Heads H(c_.d);
  const int64_t n = H.score_elements();
  const TypedPtr qkv = A[kActQkv].ptr(), probs = A[kActAttnProbs].ptr();
  Buffer dprobs = c_.activation(kWork, n);
  const TypedPtr dp = dprobs.ptr();
  for (int64_t i = 0; i < H.m; ++i) {
    const MH_Tensor dc = H.context(dctx, i);
    ops::gemm(c_.dev, dc, H.qkv(qkv, H.m + 1), H.scores(dp, i), false, true, 0);                   // dP = dC V^T
    ops::gemm(c_.dev, H.scores(probs, i), dc, H.qkv(dqkv, H.m + 1), true, false, i > 0 ? 1.f : 0.f);  // dV += P^T dC
  }
  ops::dropout_bwd(c_.dev, dp, static_cast<uint8_t*>(A[kActAttnMask].data()), dp, n, c_.d.attention_dropout);
  MH_SoftmaxArgs s{};
  s.out = A[kActAttnScores].t({n / (H.S * H.S), H.S, H.S});
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
double AttentionPart::activation_bytes(const ModelDims& d, double e, Activation a) {
  const double b = double(d.micro_batch), t = double(d.tp);
  // Each chunk's c queries score against the T_k keys before them: s^2 on
  // one rank, about s^2 / cp with balanced context parallelism.
  double score_columns = 0;
  for (int64_t k = 0; k < d.chunks(); ++k) score_columns += double(d.chunk_start(k) + d.chunk_len());
  // With Ulysses a rank scores whole sequences of a/(t cp) heads: s^2 / cp.
  const double scores = d.cp_comm == ContextComm::kA2a ? double(d.local_seq()) * double(d.seq)
                                                       : double(d.chunk_len()) * score_columns;
  // sbaD: the rows' query heads (a D = h where the head size is h/a).
  const double sbaD = double(d.rows()) * double(d.attention_width()), as2b = double(d.heads) * scores * b;
  const double kv_share = double(d.kv()) / double(d.heads);
  const bool flash = d.spec.attention_backend == AttentionBackend::kFlash;
  switch (a) {
    case kActQkv: return (1 + 2 * kv_share) * e * sbaD / t;
    case kActContext: return e * sbaD / t + (flash ? 4 * double(d.heads) * double(d.rows()) / t : 0);
    case kActAttnScores:
    case kActAttnProbs: return flash ? 0 : e * as2b / t;
    case kActAttnMask: return flash ? 0 : as2b / t;
    default: return 0;
  }
}

int64_t FlashAttentionPart::lse_offset(const ModelDims& d, int32_t dtype) {
  const int64_t e = int64_t(dtype_size(dtype));
  return (d.rows() * d.local_attention() * e + 3) / 4 * 4 / e;
}

MH_AttentionArgs FlashAttentionPart::args(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  const Heads H(c_.d);
  const TypedPtr qkv = A[kActQkv].ptr(), ctx = A[kActContext].ptr();
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

// With context parallelism the rank's chunk k is one call against the
// gathered keys before it: its queries start at position q_offset = p_k of
// T_k = p_k + c keys, its dropout block at row p_k of the global [s, s]
// probabilities, and its log-sum-exp [b * groups, m, c] follows the earlier
// chunks'.
MH_AttentionArgs FlashAttentionPart::chunk_args(LayerActivations& A, const LayerPass& pass, int64_t layer,
                                                TypedPtr kv, int64_t k) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const TypedPtr qkv = A[kActQkv].ptr(), ctx = A[kActContext].ptr();
  MH_AttentionArgs a = args(A, pass, layer);
  a.q = H.queries(qkv, k * C.c(), C.c());
  a.k = C.gathered(kv, 0, k);
  a.v = C.gathered(kv, 1, k);
  a.out = H.contexts(ctx, k * C.c(), C.c());
  a.lse = view((ctx + lse_offset(c_.d, ctx.dtype)).data, MH_F32, {H.batch, H.m, C.c()});
  a.lse.data = static_cast<float*>(a.lse.data) + k * H.batch * H.m * C.c();
  a.q_offset = c_.d.chunk_start(k);
  a.dropout_rows = a.dropout_cols = c_.d.seq;
  a.dropout_row0 = c_.d.chunk_start(k);
  return a;
}

void FlashAttentionPart::core(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  if (A.has(kActContext)) return;
  const int32_t dtype = c_.dev.info().compute_dtype;
  const int64_t lse_bytes = Heads(c_.d).batch * Heads(c_.d).m * c_.d.local_seq() * 4, e = int64_t(dtype_size(dtype));
  A[kActContext] = Buffer(c_.dev, kAct, lse_offset(c_.d, dtype) + lse_bytes / e, dtype);
  if (c_.d.cp == 1) return c_.dev.run(&MH_KernelsApi::attention, args(A, pass, layer), "attention");
  if (c_.d.cp_comm == ContextComm::kP2p) return ring(A, pass, layer);
  const Buffer kv = gather_kv(A[kActQkv].ptr());
  for (int64_t k = 0; k < c_.d.chunks(); ++k)
    c_.dev.run(&MH_KernelsApi::attention, chunk_args(A, pass, layer, kv.ptr(), k), "attention");
}

// The op accumulates into dq, dk and dv (a ring adds key blocks), so dqkv
// starts at zero.
void FlashAttentionPart::core_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                                  TypedPtr dqkv) const {
  const Heads H(c_.d);
  ops::fill(c_.dev, dqkv, c_.d.rows() * c_.d.local_qkv(), 0.0f);
  if (c_.d.cp > 1) return chunks_bwd(A, pass, layer, dctx, dqkv);
  MH_AttentionArgs a = args(A, pass, layer);
  a.dout = H.contexts(dctx);
  a.dq = H.queries(dqkv);
  a.dk = H.qkv(dqkv, H.m);
  a.dv = H.qkv(dqkv, H.m + 1);
  c_.dev.run(&MH_KernelsApi::attention_bwd, a, "attention_bwd");
}

// Each chunk adds its queries' share to the gathered keys' and values'
// gradients, which go back to their owners as the unfused core's do.
void FlashAttentionPart::chunks_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                                    TypedPtr dqkv) const {
  if (c_.d.cp_comm == ContextComm::kP2p) return ring_bwd(A, pass, layer, dctx, dqkv);
  const Chunks C(c_.d);
  const int64_t n = c_.d.cp * C.kv_chunk() * c_.d.chunks();
  const Buffer kv = gather_kv(A[kActQkv].ptr());
  Buffer dkv = c_.activation(kWork, n);
  ops::fill(c_.dev, dkv.ptr(), n, 0.0f);
  for (int64_t k = 0; k < c_.d.chunks(); ++k) {
    MH_AttentionArgs a = chunk_args(A, pass, layer, kv.ptr(), k);
    a.dout = C.H.contexts(dctx, k * C.c(), C.c());
    a.dq = C.H.queries(dqkv, k * C.c(), C.c());
    a.dk = C.gathered(dkv.ptr(), 0, k);
    a.dv = C.gathered(dkv.ptr(), 1, k);
    c_.dev.run(&MH_KernelsApi::attention_bwd, a, "attention_bwd");
  }
  scatter_dkv(dkv.ptr(), dqkv);
}

template <class AtStep>
void FlashAttentionPart::ring_walk(LayerActivations& A, AtStep&& at_step) const {
  const Chunks C(c_.d);
  const int64_t n = C.kv_chunk() * c_.d.chunks();
  Buffer block = c_.activation(kWork, n), next = c_.activation(kWork, n);
  ops::strided_copy(c_.dev, C.H.kv(A[kActQkv].ptr()), C.local_kv(block.ptr()));
  for (int32_t step = 0; step < c_.d.cp; ++step) {
    if (step > 0) {
      ring_shift(block.ptr(), next.ptr(), n);
      std::swap(block, next);
    }
    at_step(step, block.ptr());
  }
}

template <class Visit>
void FlashAttentionPart::ring_step(int32_t step, Visit&& visit) const {
  const int32_t owner = (c_.d.cp_rank - step + c_.d.cp) % c_.d.cp;
  for (int64_t k = 0; k < c_.d.chunks(); ++k)
    for (int64_t j = 0; j < c_.d.chunks(); ++j)
      // A key chunk after the query chunk is wholly masked: skipping it is
      // what load balancing evens out over the ranks.
      if (c_.d.chunk_index(owner, j) <= c_.d.chunk_index(c_.d.cp_rank, k)) visit(k, owner, j);
}

void FlashAttentionPart::ring_shift(TypedPtr block, TypedPtr next, int64_t n) const {
  std::vector<int64_t> send(size_t(c_.d.cp), 0), recv(size_t(c_.d.cp), 0);
  send[size_t((c_.d.cp_rank + 1) % c_.d.cp)] = n;
  recv[size_t((c_.d.cp_rank - 1 + c_.d.cp) % c_.d.cp)] = n;
  c_.context->all_to_all(block, send, next, recv);
}

// Chunk k's queries at global chunk q against key chunk g: q_offset is
// their distance, (q - g) c, and the dropout block sits at row q c, column
// g c of the global [s, s] probabilities.
MH_AttentionArgs FlashAttentionPart::ring_args(LayerActivations& A, const LayerPass& pass, int64_t layer,
                                               TypedPtr block, int64_t k, int32_t owner, int64_t j) const {
  const Chunks C(c_.d);
  MH_AttentionArgs a = chunk_args(A, pass, layer, block, k);
  const int64_t key_start = c_.d.chunk_index(owner, j) * C.c();
  a.k = C.block(block, 0, j);
  a.v = C.block(block, 1, j);
  a.q_offset = c_.d.chunk_start(k) - key_start;
  a.dropout_col0 = key_start;
  return a;
}

void FlashAttentionPart::ring(LayerActivations& A, const LayerPass& pass, int64_t layer) const {
  // A chunk's first block writes its context and log-sum-exp, the later
  // ones merge into them.
  std::vector<bool> started(size_t(c_.d.chunks()), false);
  ring_walk(A, [&](int32_t step, TypedPtr block) {
    ring_step(step, [&](int64_t k, int32_t owner, int64_t j) {
      MH_AttentionArgs a = ring_args(A, pass, layer, block, k, owner, j);
      a.accumulate = started[size_t(k)] ? 1 : 0;
      started[size_t(k)] = true;
      c_.dev.run(&MH_KernelsApi::attention, a, "attention");
    });
  });
}

// The op reads the final context and log-sum-exp with each block, so every
// block's gradients are its share of the whole softmax's; they travel with
// the block in f32 and reach its owner one shift after its last step.
void FlashAttentionPart::ring_bwd(LayerActivations& A, const LayerPass& pass, int64_t layer, TypedPtr dctx,
                                  TypedPtr dqkv) const {
  const Chunks C(c_.d);
  const Heads& H = C.H;
  const int64_t n = C.kv_chunk() * c_.d.chunks();
  Buffer dblock(c_.dev, kWork, n, MH_F32), dnext(c_.dev, kWork, n, MH_F32);
  ops::fill(c_.dev, dblock.ptr(), n, 0.0f);
  ring_walk(A, [&](int32_t step, TypedPtr block) {
    ring_step(step, [&](int64_t k, int32_t owner, int64_t j) {
      MH_AttentionArgs a = ring_args(A, pass, layer, block, k, owner, j);
      a.dout = H.contexts(dctx, k * C.c(), C.c());
      a.dq = H.queries(dqkv, k * C.c(), C.c());
      a.dk = C.block(dblock.ptr(), 0, j);
      a.dv = C.block(dblock.ptr(), 1, j);
      c_.dev.run(&MH_KernelsApi::attention_bwd, a, "attention_bwd");
    });
    ring_shift(dblock.ptr(), dnext.ptr(), n);
    std::swap(dblock, dnext);
  });
  Buffer back = c_.activation(kWork, n);
  ops::copy(c_.dev, dblock.ptr(), back.ptr(), n);
  ops::strided_copy(c_.dev, C.local_kv(back.ptr()), H.kv(dqkv));
}

}  // namespace mh
