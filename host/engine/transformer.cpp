#include "engine/transformer.hpp"

#include <cmath>

#include "engine/ops.hpp"

namespace mh {
namespace {

constexpr int kSiteEmbedding = 0, kSiteAttention = 1, kSiteMlp = 2, kSiteProbs = 3;
constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Transformer::Transformer(Device& device, ParamSet& params, TensorParallel& tp, const ModelDims& dims, ChunkSpec chunk,
                         KeepTable keep, ParamsNeeded needed)
    : dev_(device),
      params_(params),
      tp_(tp),
      d_(dims),
      chunk_(chunk),
      keep_(std::move(keep)),
      needed_(std::move(needed)),
      ctx_{device, params, tp, d_},
      norm_(ctx_),
      attention_(ctx_),
      mlp_(ctx_) {}

MH_RngSpan Transformer::hidden_span(const MicroBatch& mb, int64_t layer, int site) const {
  // The local rows are one contiguous block of the [s, b, h] tensor.
  const uint64_t n = uint64_t(d_.local_rows() * d_.hidden);
  return MH_RngSpan{mix(mb.key ^ mix(uint64_t(layer * 8 + site))), uint64_t(d_.first_local_row() * d_.hidden), n, n};
}

MH_RngSpan Transformer::attention_span(const MicroBatch& mb, int64_t layer) const {
  // Local probabilities are [b, a/t, s, s] of the global [b, a, s, s].
  const uint64_t per_head = uint64_t(d_.seq * d_.seq);
  return MH_RngSpan{mix(mb.key ^ mix(uint64_t(layer * 8 + kSiteProbs))),
                    uint64_t(d_.tp_rank * d_.local_heads()) * per_head, uint64_t(d_.local_heads()) * per_head,
                    uint64_t(d_.heads) * per_head};
}

double Transformer::forward(ForwardState& st, const MicroBatch& mb, Buffer input, bool train) {
  const float p = train ? d_.dropout : 0.f, attn_p = train ? d_.attention_dropout : 0.f;
  auto need = [&](std::span<const int> ids) {
    if (needed_) needed_(ids);
  };
  st.acts.resize(size_t(chunk_.layers + 1));
  if (chunk_.first) {
    need(params_.embedding_ids());
    embed(st, mb, p);
  } else {
    st.acts[0][MH_ACT_LAYER_INPUT] = std::move(input);
  }
  for (int64_t l = 0; l < chunk_.layers; ++l) {
    need(params_.layer(global(l)).ids());
    layer_forward(st, l, mb, p, attn_p, true);
    if (train) drop_unkept(st, l);
    else st.acts[size_t(l)].clear();
  }
  if (!chunk_.last) return 0;
  need(params_.head_ids());
  double loss = head_forward(st, mb);
  if (!train) st = ForwardState{};
  return loss;
}

Buffer Transformer::backward(ForwardState& st, const MicroBatch& mb, Buffer dout, float loss_scale,
                             const GradsFinalised& finalised) {
  auto done = [&](std::span<const int> ids) {
    if (finalised) finalised(ids);
  };
  Buffer dres;
  if (chunk_.last) {
    dres = Buffer(dev_, kWork, d_.local_rows() * d_.hidden);
    head_backward(st, mb, loss_scale, dres.f32());
    done(params_.head_ids());
  } else {
    dres = std::move(dout);
  }
  st.acts[size_t(chunk_.layers)].clear();
  for (int64_t l = chunk_.layers - 1; l >= 0; --l) {
    recompute_for_backward(st, l, mb);
    layer_backward(st, l, dres.f32());
    st.acts[size_t(l)].clear();
    done(params_.layer(global(l)).ids());
  }
  if (!chunk_.first) return dres;
  embed_bwd(st, mb, dres.f32());
  done(params_.embedding_ids());
  return Buffer();
}

void Transformer::drop_unkept(ForwardState& st, int64_t l) {
  for (int a = 0; a < MH_ACT_COUNT; ++a)
    if (!keep_[size_t(l)][size_t(a)]) st.acts[size_t(l)].slot[size_t(a)].release();
}

void Transformer::recompute_for_backward(ForwardState& st, int64_t l, const MicroBatch& mb) {
  if (st.acts[size_t(l)].complete()) return;
  if (!st.acts[size_t(l)].has(MH_ACT_LAYER_INPUT)) {
    // A chunk's received input is always kept (the policy cannot drop what
    // only the previous stage could recompute), so l == 0 here means the
    // first chunk, whose input is the embedding.
    if (l == 0) {
      embed(st, mb, d_.dropout);
    } else {
      recompute_for_backward(st, l - 1, mb);
      layer_forward(st, l - 1, mb, d_.dropout, d_.attention_dropout, true);
    }
  }
  layer_forward(st, l, mb, d_.dropout, d_.attention_dropout, false);
}

// ---- embeddings -----------------------------------------------------------

void Transformer::embed(ForwardState& st, const MicroBatch& mb, float p) {
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden;
  // The lookups sum in f32 (the vocabulary shards are reduced in f32); the
  // dropout writes the layer input in the compute dtype.
  Buffer partial(dev_, kWork, N * h), scratch;
  ops::embedding(dev_, P(params_.wte()), d_.local_vocab(), static_cast<int32_t*>(mb.ids.data()), partial.f32(), N,
                 h, d_.vocab_start(), false);
  TypedPtr e = tp_.exit_fwd(partial.f32(), scratch);
  if (params_.wpe() >= 0)
    ops::embedding(dev_, P(params_.wpe()), d_.seq, static_cast<int32_t*>(mb.positions.data()), e, n, h, 0, true);
  Buffer& x0 = st.acts[0][MH_ACT_LAYER_INPUT];
  x0 = activation(kAct, n * h);
  st.emb_mask = Buffer(dev_, kAct, n * h, MH_U8);
  ops::dropout(dev_, e, {}, x0.ptr(), static_cast<uint8_t*>(st.emb_mask.data()), n * h, p,
               hidden_span(mb, -1, kSiteEmbedding));
}

void Transformer::embed_bwd(ForwardState& st, const MicroBatch& mb, const float* dres) {
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden;
  Buffer de(dev_, kWork, n * h), scratch;
  ops::dropout_bwd(dev_, dres, static_cast<uint8_t*>(st.emb_mask.data()), de.f32(), n * h, d_.dropout);
  st.emb_mask.release();
  if (params_.wpe() >= 0)
    ops::embedding_bwd(dev_, G(params_.wpe()), d_.seq, static_cast<int32_t*>(mb.positions.data()), de.f32(), n, h, 0);
  TypedPtr df = tp_.exit_bwd(de.f32(), scratch);
  ops::embedding_bwd(dev_, G(params_.wte()), d_.local_vocab(), static_cast<int32_t*>(mb.ids.data()), df, N, h,
                     d_.vocab_start());
}

// ---- one layer ------------------------------------------------------------

void Transformer::layer_forward(ForwardState& st, int64_t l, const MicroBatch& mb, float p, float attn_p,
                                bool need_output) {
  LayerActivations& A = st.acts[size_t(l)];
  const LayerParamIds& w = params_.layer(global(l));
  const int64_t n = d_.local_rows(), h = d_.hidden;
  const TypedPtr x = A[MH_ACT_LAYER_INPUT].ptr();
  if (!A.has(MH_ACT_LN1)) A[MH_ACT_LN1] = norm_.forward(x, w.ln1_w, w.ln1_b);
  attention_.forward(A, w, attn_p, attention_span(mb, global(l)));
  if (!A.has(MH_ACT_RESIDUAL1) || !A.has(MH_ACT_ATTN_DROP_MASK)) {
    if (!A.has(MH_ACT_RESIDUAL1)) A[MH_ACT_RESIDUAL1] = activation(kAct, n * h);
    residual_branch(st, l, mb, kSiteAttention, A[MH_ACT_CONTEXT].ptr(), d_.local_hidden(), w.proj_w, w.proj_b, x,
                    MH_ACT_ATTN_DROP_MASK, A[MH_ACT_RESIDUAL1].ptr(), p);
  }
  const TypedPtr mid = A[MH_ACT_RESIDUAL1].ptr();
  if (!A.has(MH_ACT_LN2)) A[MH_ACT_LN2] = norm_.forward(mid, w.ln2_w, w.ln2_b);
  mlp_.forward(A, w);
  Buffer& next = st.acts[size_t(l + 1)][MH_ACT_LAYER_INPUT];
  const bool write_next = need_output && !next;
  if (!write_next && A.has(MH_ACT_MLP_DROP_MASK)) return;
  // Without need_output the branch only regenerates its dropout mask.
  Buffer out = activation(write_next ? kAct : kWork, n * h);
  residual_branch(st, l, mb, kSiteMlp, A[MH_ACT_GELU].ptr(), d_.local_ffn(), w.fc2_w, w.fc2_b, mid,
                  MH_ACT_MLP_DROP_MASK, out.ptr(), p);
  if (write_next) next = std::move(out);
}

// The GEMM's partial sums are f32 in every precision: the tensor group
// reduces them in f32, and the dropout rounds once, into `out`.
void Transformer::residual_branch(ForwardState& st, int64_t l, const MicroBatch& mb, int site, TypedPtr branch_in,
                                  int64_t branch_width, int w, int b, TypedPtr residual, MH_Activation mask,
                                  TypedPtr out, float p) {
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden;
  LayerActivations& A = st.acts[size_t(l)];
  Buffer partial(dev_, kWork, N * h), scratch;
  ops::linear(dev_, branch_in, P(w), partial.f32(), N, branch_width, h);
  TypedPtr y = tp_.exit_fwd(partial.f32(), scratch);
  if (b >= 0) ops::bias_add(dev_, y, P(b), n, h);
  A[mask] = Buffer(dev_, kAct, n * h, MH_U8);
  ops::dropout(dev_, y, residual, out, static_cast<uint8_t*>(A[mask].data()), n * h, p, hidden_span(mb, global(l), site));
}

Buffer Transformer::residual_branch_bwd(ForwardState& st, int64_t l, const float* dres, TypedPtr branch_in,
                                        int64_t branch_width, int w, int b, MH_Activation mask) {
  LayerActivations& A = st.acts[size_t(l)];
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden;
  Buffer dloc = activation(kWork, n * h), scratch;
  ops::dropout_bwd(dev_, dres, static_cast<uint8_t*>(A[mask].data()), dloc.ptr(), n * h, d_.dropout);
  if (b >= 0) ops::bias_bwd(dev_, dloc.ptr(), G(b), n, h);
  TypedPtr dy = tp_.exit_bwd(dloc.ptr(), scratch);
  Buffer din = activation(kWork, N * branch_width);
  ops::linear_dx(dev_, dy, P(w), din.ptr(), N, branch_width, h);
  ops::linear_dw(dev_, dy, branch_in, G(w), N, branch_width, h);
  return din;
}

// Activation gradients are in the compute dtype where GEMMs read them; the
// residual stream's gradient `dres` and the input gradients of column-parallel
// GEMMs (reduced across the tensor group) stay f32.
void Transformer::layer_backward(ForwardState& st, int64_t l, float* dres) {
  LayerActivations& A = st.acts[size_t(l)];
  const LayerParamIds& w = params_.layer(global(l));
  Buffer dfull(dev_, kWork, d_.rows() * d_.hidden), scratch;

  Buffer dact = residual_branch_bwd(st, l, dres, A[MH_ACT_GELU].ptr(), d_.local_ffn(), w.fc2_w, w.fc2_b,
                                    MH_ACT_MLP_DROP_MASK);
  mlp_.backward(A, w, dact, dfull);
  dact.release();
  norm_.backward(tp_.enter_bwd(dfull.f32(), scratch), A[MH_ACT_RESIDUAL1].ptr(), A[MH_ACT_LN2], w.ln2_w, w.ln2_b,
                 dres);

  Buffer dctx = residual_branch_bwd(st, l, dres, A[MH_ACT_CONTEXT].ptr(), d_.local_hidden(), w.proj_w, w.proj_b,
                                    MH_ACT_ATTN_DROP_MASK);
  attention_.backward(A, w, dctx.ptr(), dfull);
  dctx.release();
  norm_.backward(tp_.enter_bwd(dfull.f32(), scratch), A[MH_ACT_LAYER_INPUT].ptr(), A[MH_ACT_LN1], w.ln1_w, w.ln1_b,
                 dres);
}

// ---- output head and loss -------------------------------------------------

double Transformer::head_forward(ForwardState& st, const MicroBatch& mb) {
  const int64_t N = d_.rows(), h = d_.hidden, V = d_.local_vocab();
  st.lnf = norm_.forward(st.acts[size_t(chunk_.layers)][MH_ACT_LAYER_INPUT].ptr(), params_.lnf_w(), params_.lnf_b());
  Buffer gathered;
  TypedPtr in = tp_.enter_fwd(st.lnf.ptr(), gathered);
  // Logits are f32 in every precision: the softmax over a large vocabulary
  // sums many small exponentials, and the loss is a difference of logits.
  st.logits = Buffer(dev_, kAct, N * V);
  ops::linear(dev_, in, P(params_.head_w()), st.logits.f32(), N, h, V);
  gathered.release();
  // [row_max | sum_exp | target_logit], each [N]; shards combine in between.
  st.xent = Buffer(dev_, kAct, 3 * N);
  MH_XentArgs x{};
  x.logits = st.logits.t({N, V});
  x.targets = mb.targets.t({N});
  x.row_max = view(st.xent.f32(), MH_F32, {N});
  x.sum_exp = view(st.xent.f32() + N, MH_F32, {N});
  x.target_logit = view(st.xent.f32() + 2 * N, MH_F32, {N});
  x.id_start = d_.vocab_start();
  x.id_limit = d_.real_vocab();
  x.step = MH_XENT_MAX;
  dev_.run(&MH_KernelsApi::xent, x, "xent max");
  if (d_.tp > 1) tp_.group().all_reduce(st.xent.f32(), N, MH_REDUCE_MAX);
  x.step = MH_XENT_STATS;
  dev_.run(&MH_KernelsApi::xent, x, "xent stats");
  if (d_.tp > 1) tp_.group().all_reduce(st.xent.f32() + N, 2 * N);
  std::vector<float> stats(size_t(3 * N));
  dev_.to_host(stats.data(), st.xent.data(), stats.size() * sizeof(float));
  double loss = 0;
  for (int64_t r = 0; r < N; ++r)
    if (r % d_.micro_batch < mb.counted)  // rows are [s, b]: r % b is the sample
      loss += std::log(double(stats[size_t(N + r)])) + stats[size_t(r)] - stats[size_t(2 * N + r)];
  return loss;
}

void Transformer::head_backward(ForwardState& st, const MicroBatch& mb, float loss_scale, float* dres) {
  const int64_t N = d_.rows(), h = d_.hidden, V = d_.local_vocab();
  MH_XentArgs x{};
  x.step = MH_XENT_BWD;
  x.logits = st.logits.t({N, V});
  x.row_max = view(st.xent.f32(), MH_F32, {N});
  x.sum_exp = view(st.xent.f32() + N, MH_F32, {N});
  x.target_logit = view(st.xent.f32() + 2 * N, MH_F32, {N});
  x.id_start = d_.vocab_start();
  x.id_limit = d_.real_vocab();
  x.scale = loss_scale;
  x.targets = mb.targets.t({N});
  dev_.run(&MH_KernelsApi::xent, x, "xent backward");
  // The GEMMs read the logits' gradient in the compute dtype.
  TypedPtr dlogits = st.logits.ptr();
  Buffer rounded;
  if (dlogits.dtype != dev_.info().compute_dtype) {
    rounded = activation(kWork, N * V);
    ops::copy(dev_, dlogits, rounded.ptr(), N * V);
    st.logits.release();
    dlogits = rounded.ptr();
  }
  Buffer dfull(dev_, kWork, N * h), s1, s2;
  ops::linear_dx(dev_, dlogits, P(params_.head_w()), dfull.f32(), N, h, V);
  TypedPtr in = tp_.enter_fwd(st.lnf.ptr(), s1);
  ops::linear_dw(dev_, dlogits, in, G(params_.head_w()), N, h, V);
  s1.release();
  st.logits.release();
  rounded.release();
  st.xent.release();
  TypedPtr dln = tp_.enter_bwd(dfull.f32(), s2);
  ops::fill(dev_, dres, d_.local_rows() * h, 0);
  norm_.backward(dln, st.acts[size_t(chunk_.layers)][MH_ACT_LAYER_INPUT].ptr(), st.lnf, params_.lnf_w(),
                 params_.lnf_b(), dres);
  st.lnf.release();
}

}  // namespace mh
