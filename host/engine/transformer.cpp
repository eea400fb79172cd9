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
                         KeepTable keep)
    : dev_(device), params_(params), tp_(tp), d_(dims), chunk_(chunk), keep_(std::move(keep)) {}

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
  st.acts.resize(size_t(chunk_.layers + 1));
  if (chunk_.first) embed(st, mb, p);
  else st.acts[0][MH_ACT_LAYER_INPUT] = std::move(input);
  for (int64_t l = 0; l < chunk_.layers; ++l) {
    layer_forward(st, l, mb, p, attn_p, true);
    if (train) drop_unkept(st, l);
    else st.acts[size_t(l)].clear();
  }
  if (!chunk_.last) return 0;
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
    done(std::array<int, 3>{params_.lnf_w(), params_.lnf_b(), params_.wte()});
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
  done(std::array<int, 2>{params_.wpe(), params_.wte()});
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
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden, hl = d_.local_hidden(), f = d_.local_ffn();
  const TypedPtr x = A[MH_ACT_LAYER_INPUT].ptr();
  auto make = [&](MH_Activation a, int64_t elems) {
    if (A.has(a)) return false;
    A[a] = activation(kAct, elems);
    return true;
  };
  if (!A.has(MH_ACT_LN1)) A[MH_ACT_LN1] = norm(x, w.ln1_w, w.ln1_b);
  if (!A.has(MH_ACT_QKV)) {
    Buffer gathered;
    TypedPtr in = tp_.enter_fwd(A[MH_ACT_LN1].ptr(), gathered);
    make(MH_ACT_QKV, N * 3 * hl);
    ops::linear(dev_, in, W(w.qkv_w), A[MH_ACT_QKV].ptr(), N, h, 3 * hl);
    ops::bias_add(dev_, A[MH_ACT_QKV].ptr(), P(w.qkv_b), N, 3 * hl);
  }
  attention_core(st, l, mb, attn_p);
  if (!A.has(MH_ACT_RESIDUAL1) || !A.has(MH_ACT_ATTN_DROP_MASK)) {
    make(MH_ACT_RESIDUAL1, n * h);
    residual_branch(st, l, mb, kSiteAttention, A[MH_ACT_CONTEXT].ptr(), hl, w.proj_w, w.proj_b, x,
                    MH_ACT_ATTN_DROP_MASK, A[MH_ACT_RESIDUAL1].ptr(), p);
  }
  const TypedPtr mid = A[MH_ACT_RESIDUAL1].ptr();
  if (!A.has(MH_ACT_LN2)) A[MH_ACT_LN2] = norm(mid, w.ln2_w, w.ln2_b);
  if (!A.has(MH_ACT_FC1)) {
    Buffer gathered;
    TypedPtr in = tp_.enter_fwd(A[MH_ACT_LN2].ptr(), gathered);
    make(MH_ACT_FC1, N * f);
    ops::linear(dev_, in, W(w.fc1_w), A[MH_ACT_FC1].ptr(), N, h, f);
    ops::bias_add(dev_, A[MH_ACT_FC1].ptr(), P(w.fc1_b), N, f);
  }
  if (make(MH_ACT_GELU, N * f)) ops::gelu(dev_, A[MH_ACT_FC1].ptr(), A[MH_ACT_GELU].ptr(), N * f);
  Buffer& next = st.acts[size_t(l + 1)][MH_ACT_LAYER_INPUT];
  const bool write_next = need_output && !next;
  if (!write_next && A.has(MH_ACT_MLP_DROP_MASK)) return;
  // Without need_output the branch only regenerates its dropout mask.
  Buffer out = activation(write_next ? kAct : kWork, n * h);
  residual_branch(st, l, mb, kSiteMlp, A[MH_ACT_GELU].ptr(), f, w.fc2_w, w.fc2_b, mid, MH_ACT_MLP_DROP_MASK, out.ptr(), p);
  if (write_next) next = std::move(out);
}

// out [n, h] = residual + dropout(exit(branch_in @ W^T) + bias), W [h, width].
// The GEMM's partial sums are f32 in every precision: the tensor group
// reduces them in f32, and the dropout rounds once, into `out`.
void Transformer::residual_branch(ForwardState& st, int64_t l, const MicroBatch& mb, int site, TypedPtr branch_in,
                                  int64_t branch_width, int w, int b, TypedPtr residual, MH_Activation mask,
                                  TypedPtr out, float p) {
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden;
  LayerActivations& A = st.acts[size_t(l)];
  Buffer partial(dev_, kWork, N * h), scratch;
  ops::linear(dev_, branch_in, W(w), partial.f32(), N, branch_width, h);
  TypedPtr y = tp_.exit_fwd(partial.f32(), scratch);
  ops::bias_add(dev_, y, P(b), n, h);
  A[mask] = Buffer(dev_, kAct, n * h, MH_U8);
  ops::dropout(dev_, y, residual, out, static_cast<uint8_t*>(A[mask].data()), n * h, p, hidden_span(mb, global(l), site));
}

// Q, K, V of head j of sample b sit at qkv[(s * B + b) * a_t + j][0|1|2][:]: a
// [B * a_t, s, d] view with batch stride 3d and row stride B * a_t * 3d.
static MH_Tensor qkv_view(TypedPtr qkv, int which, const ModelDims& d) {
  const int64_t D = d.head_dim(), G = d.micro_batch * d.local_heads();
  return view((qkv + which * D).data, qkv.dtype, {G, d.seq, D}, {3 * D, G * 3 * D, 1});
}
static MH_Tensor ctx_view(TypedPtr ctx, const ModelDims& d) {
  const int64_t D = d.head_dim(), G = d.micro_batch * d.local_heads();
  return view(ctx.data, ctx.dtype, {G, d.seq, D}, {D, G * D, 1});
}

void Transformer::attention_core(ForwardState& st, int64_t l, const MicroBatch& mb, float attn_p) {
  LayerActivations& A = st.acts[size_t(l)];
  const int64_t G = d_.micro_batch * d_.local_heads(), S = d_.seq, n = G * S * S;
  const TypedPtr qkv = A[MH_ACT_QKV].ptr();
  if (!A.has(MH_ACT_ATTN_SCORES)) {
    A[MH_ACT_ATTN_SCORES] = activation(kAct, n);
    MH_Tensor scores = A[MH_ACT_ATTN_SCORES].t({G, S, S});
    ops::gemm(dev_, qkv_view(qkv, 0, d_), qkv_view(qkv, 1, d_), scores, false, true, 0);
    MH_SoftmaxArgs s{};
    s.x = scores;
    s.out = scores;
    s.scale = 1.0f / std::sqrt(float(d_.head_dim()));
    dev_.run(&MH_KernelsApi::softmax, s, "softmax");
  }
  if (!A.has(MH_ACT_ATTN_PROBS) || !A.has(MH_ACT_ATTN_MASK)) {
    A[MH_ACT_ATTN_PROBS] = activation(kAct, n);
    A[MH_ACT_ATTN_MASK] = Buffer(dev_, kAct, n, MH_U8);
    ops::dropout(dev_, A[MH_ACT_ATTN_SCORES].ptr(), {}, A[MH_ACT_ATTN_PROBS].ptr(),
                 static_cast<uint8_t*>(A[MH_ACT_ATTN_MASK].data()), n, attn_p, attention_span(mb, global(l)));
  }
  if (!A.has(MH_ACT_CONTEXT)) {
    A[MH_ACT_CONTEXT] = activation(kAct, d_.rows() * d_.local_hidden());
    ops::gemm(dev_, A[MH_ACT_ATTN_PROBS].t({G, S, S}), qkv_view(qkv, 2, d_), ctx_view(A[MH_ACT_CONTEXT].ptr(), d_),
              false, false, 0);
  }
}

void Transformer::attention_bwd(ForwardState& st, int64_t l, TypedPtr dctx, TypedPtr dqkv) {
  LayerActivations& A = st.acts[size_t(l)];
  const int64_t G = d_.micro_batch * d_.local_heads(), S = d_.seq;
  const TypedPtr qkv = A[MH_ACT_QKV].ptr();
  MH_Tensor dctx_t = ctx_view(dctx, d_);
  Buffer dprobs = activation(kWork, G * S * S);
  MH_Tensor dp = dprobs.t({G, S, S});
  ops::gemm(dev_, dctx_t, qkv_view(qkv, 2, d_), dp, false, true, 0);                       // dP = dC V^T
  ops::gemm(dev_, A[MH_ACT_ATTN_PROBS].t({G, S, S}), dctx_t, qkv_view(dqkv, 2, d_), true, false, 0);  // dV = P^T dC
  ops::dropout_bwd(dev_, dprobs.ptr(), static_cast<uint8_t*>(A[MH_ACT_ATTN_MASK].data()), dprobs.ptr(), G * S * S,
                   d_.attention_dropout);
  MH_SoftmaxArgs s{};
  s.out = A[MH_ACT_ATTN_SCORES].t({G, S, S});
  s.dout = dp;
  s.dx = dp;
  s.scale = 1.0f / std::sqrt(float(d_.head_dim()));
  dev_.run(&MH_KernelsApi::softmax_bwd, s, "softmax_bwd");
  ops::gemm(dev_, dp, qkv_view(qkv, 1, d_), qkv_view(dqkv, 0, d_), false, false, 0);  // dQ = dS K
  ops::gemm(dev_, dp, qkv_view(qkv, 0, d_), qkv_view(dqkv, 1, d_), true, false, 0);   // dK = dS^T Q
}

// Activation gradients are in the compute dtype where GEMMs read them; the
// residual stream's gradient `dres` and the input gradients of column-parallel
// GEMMs (reduced across the tensor group) stay f32.
void Transformer::layer_backward(ForwardState& st, int64_t l, float* dres) {
  LayerActivations& A = st.acts[size_t(l)];
  const LayerParamIds& w = params_.layer(global(l));
  const int64_t n = d_.local_rows(), N = d_.rows(), h = d_.hidden, hl = d_.local_hidden(), f = d_.local_ffn();

  // MLP: x_out = mid + dropout(exit(gelu(fc1(ln2(mid))) W2^T) + b2)
  Buffer dloc = activation(kWork, n * h), s1, s2, s3;
  ops::dropout_bwd(dev_, dres, static_cast<uint8_t*>(A[MH_ACT_MLP_DROP_MASK].data()), dloc.ptr(), n * h, d_.dropout);
  ops::bias_bwd(dev_, dloc.ptr(), G(w.fc2_b), n, h);
  TypedPtr dy = tp_.exit_bwd(dloc.ptr(), s1);
  Buffer dh = activation(kWork, N * f);
  ops::linear_dx(dev_, dy, W(w.fc2_w), dh.ptr(), N, f, h);
  ops::linear_dw(dev_, dy, A[MH_ACT_GELU].ptr(), G(w.fc2_w), N, f, h);
  ops::gelu_bwd(dev_, A[MH_ACT_FC1].ptr(), dh.ptr(), dh.ptr(), N * f);
  ops::bias_bwd(dev_, dh.ptr(), G(w.fc1_b), N, f);
  TypedPtr ln2_in = tp_.enter_fwd(A[MH_ACT_LN2].ptr(), s2);
  ops::linear_dw(dev_, dh.ptr(), ln2_in, G(w.fc1_w), N, h, f);
  s2.release();
  Buffer dfull(dev_, kWork, N * h);
  ops::linear_dx(dev_, dh.ptr(), W(w.fc1_w), dfull.f32(), N, h, f);
  dh.release();
  TypedPtr dln = tp_.enter_bwd(dfull.f32(), s3);
  norm_bwd(dln, A[MH_ACT_RESIDUAL1].ptr(), A[MH_ACT_LN2], w.ln2_w, w.ln2_b, dres);

  // Attention: mid = x + dropout(exit(attn(ln1(x)) Wp^T) + bp)
  ops::dropout_bwd(dev_, dres, static_cast<uint8_t*>(A[MH_ACT_ATTN_DROP_MASK].data()), dloc.ptr(), n * h,
                   d_.dropout);
  ops::bias_bwd(dev_, dloc.ptr(), G(w.proj_b), n, h);
  dy = tp_.exit_bwd(dloc.ptr(), s1);
  Buffer dctx = activation(kWork, N * hl);
  ops::linear_dx(dev_, dy, W(w.proj_w), dctx.ptr(), N, hl, h);
  ops::linear_dw(dev_, dy, A[MH_ACT_CONTEXT].ptr(), G(w.proj_w), N, hl, h);
  s1.release();
  Buffer dqkv = activation(kWork, N * 3 * hl);
  attention_bwd(st, l, dctx.ptr(), dqkv.ptr());
  dctx.release();
  ops::bias_bwd(dev_, dqkv.ptr(), G(w.qkv_b), N, 3 * hl);
  TypedPtr ln1_in = tp_.enter_fwd(A[MH_ACT_LN1].ptr(), s2);
  ops::linear_dw(dev_, dqkv.ptr(), ln1_in, G(w.qkv_w), N, h, 3 * hl);
  s2.release();
  ops::linear_dx(dev_, dqkv.ptr(), W(w.qkv_w), dfull.f32(), N, h, 3 * hl);
  dln = tp_.enter_bwd(dfull.f32(), s3);
  norm_bwd(dln, A[MH_ACT_LAYER_INPUT].ptr(), A[MH_ACT_LN1], w.ln1_w, w.ln1_b, dres);
}

// out [n, h] = layernorm(x) with weight w and bias b, in a new kept buffer
// that also holds the f32 statistics backward reads.
Buffer Transformer::norm(TypedPtr x, int w, int b) {
  const int64_t n = d_.local_rows(), h = d_.hidden;
  Buffer out = layernorm_buffer(dev_, kAct, n, h, dev_.info().compute_dtype);
  ops::layernorm(dev_, x, P(w), P(b), out.ptr(), layernorm_stats(out, n, h), n, h, d_.layernorm_eps);
  return out;
}

void Transformer::norm_bwd(TypedPtr dout, TypedPtr x, const Buffer& out, int w, int b, float* dx) {
  const int64_t n = d_.local_rows(), h = d_.hidden;
  ops::layernorm_bwd(dev_, dout, x, P(w), layernorm_stats(out, n, h), dx, G(w), G(b), n, h);
}

Buffer Transformer::activation(MemCategory category, int64_t elements) {
  return Buffer(dev_, category, elements, dev_.info().compute_dtype);
}

// ---- output head and loss -------------------------------------------------

double Transformer::head_forward(ForwardState& st, const MicroBatch& mb) {
  const int64_t N = d_.rows(), h = d_.hidden, V = d_.local_vocab();
  st.lnf = norm(st.acts[size_t(chunk_.layers)][MH_ACT_LAYER_INPUT].ptr(), params_.lnf_w(), params_.lnf_b());
  Buffer gathered;
  TypedPtr in = tp_.enter_fwd(st.lnf.ptr(), gathered);
  // Logits are f32 in every precision: the softmax over a large vocabulary
  // sums many small exponentials, and the loss is a difference of logits.
  st.logits = Buffer(dev_, kAct, N * V);
  ops::linear(dev_, in, W(params_.wte()), st.logits.f32(), N, h, V);
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
  ops::linear_dx(dev_, dlogits, W(params_.wte()), dfull.f32(), N, h, V);
  TypedPtr in = tp_.enter_fwd(st.lnf.ptr(), s1);
  ops::linear_dw(dev_, dlogits, in, G(params_.wte()), N, h, V);
  s1.release();
  st.logits.release();
  rounded.release();
  st.xent.release();
  TypedPtr dln = tp_.enter_bwd(dfull.f32(), s2);
  ops::fill(dev_, dres, d_.local_rows() * h, 0);
  norm_bwd(dln, st.acts[size_t(chunk_.layers)][MH_ACT_LAYER_INPUT].ptr(), st.lnf, params_.lnf_w(), params_.lnf_b(),
           dres);
  st.lnf.release();
}

}  // namespace mh
