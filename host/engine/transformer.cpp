#include "engine/transformer.hpp"

#include <cmath>

#include "engine/ops.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

}  // namespace

Transformer::Transformer(Device& device, ParamSet& params, TensorParallel& tp, Collectives* context,
                         const ModelDims& dims, ChunkSpec chunk, KeepTable keep, ParamsNeeded needed,
                         Collectives* experts, Collectives* sequence)
    : dev_(device),
      params_(params),
      tp_(tp),
      d_(dims),
      chunk_(chunk),
      keep_(std::move(keep)),
      needed_(std::move(needed)),
      ctx_{device, params, tp, d_, context, experts, sequence},
      parts_(build_layer_parts(ctx_)),
      attention_(full_attention(ctx_, *parts_.position)),
      layer_(ctx_, parts_, *attention_),
      embedding_(ctx_),
      head_(ctx_, *parts_.norm) {}

LayerPass Transformer::training_pass(const MicroBatch& mb) const {
  auto tensor = [&](const Buffer& b) { return b.data() ? b.t({d_.micro_batch, d_.seq}) : MH_Tensor{}; };
  return {d_.dropout,
          d_.attention_dropout,
          d_.lora.dropout,
          mb.key,
          false,
          tensor(mb.document_positions),
          tensor(mb.document_starts),
          moe_aux_weight_};
}

double Transformer::forward(ForwardState& st, const MicroBatch& mb, Buffer input, bool train) {
  LayerPass pass = training_pass(mb);
  if (!train) pass.dropout = pass.attention_dropout = pass.lora_dropout = 0;
  auto need = [&](std::span<const int> ids) {
    if (needed_) needed_(ids);
  };
  st.acts.resize(size_t(chunk_.layers + 1));
  if (chunk_.first) {
    need(params_.embedding_ids());
    embed(st, mb, pass);
  } else {
    st.acts[0][kActLayerInput] = std::move(input);
  }
  for (int64_t l = 0; l < chunk_.layers; ++l) {
    need(params_.layer(global(l)).ids());
    layer_forward(st, l, pass, true);
    if (const auto& routing = st.acts[size_t(l)].routing) moe_aux_ += routing->aux;
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
    layer_.backward(st.acts[size_t(l)], global(l), training_pass(mb), dres.f32());
    st.acts[size_t(l)].clear();
    done(params_.layer(global(l)).ids());
  }
  if (!chunk_.first) return dres;
  embedding_.backward(static_cast<int32_t*>(mb.ids.data()), static_cast<int32_t*>(mb.positions.data()), st.emb_mask,
                      dres.f32());
  done(params_.embedding_ids());
  return Buffer();
}

void Transformer::drop_unkept(ForwardState& st, int64_t l) {
  for (int a = 0; a < kActCount; ++a)
    if (!keep_[size_t(l)][size_t(a)]) st.acts[size_t(l)].slot[size_t(a)].release();
}

void Transformer::recompute_for_backward(ForwardState& st, int64_t l, const MicroBatch& mb) {
  if (st.acts[size_t(l)].complete()) return;
  if (!st.acts[size_t(l)].has(kActLayerInput)) {
    // A chunk's received input is always kept (the policy cannot drop what
    // only the previous stage could recompute), so l == 0 here means the
    // first chunk, whose input is the embedding.
    if (l == 0) {
      embed(st, mb, training_pass(mb));
    } else {
      recompute_for_backward(st, l - 1, mb);
      layer_forward(st, l - 1, training_pass(mb), true);
    }
  }
  layer_forward(st, l, training_pass(mb), false);
}

void Transformer::embed(ForwardState& st, const MicroBatch& mb, const LayerPass& pass) {
  st.acts[0][kActLayerInput] = embedding_.forward(static_cast<int32_t*>(mb.ids.data()),
                                                      static_cast<int32_t*>(mb.positions.data()), pass, st.emb_mask);
}

void Transformer::layer_forward(ForwardState& st, int64_t l, const LayerPass& pass, bool need_output) {
  layer_.forward(st.acts[size_t(l)], global(l), pass, need_output ? &st.acts[size_t(l + 1)][kActLayerInput] : nullptr);
}

// ---- output head and loss -------------------------------------------------

double Transformer::head_forward(ForwardState& st, const MicroBatch& mb) {
  const int64_t N = d_.rows(), V = d_.local_vocab();
  st.lnf = head_.norm(st.acts[size_t(chunk_.layers)][kActLayerInput].ptr());
  st.logits = head_.logits(st.lnf, training_pass(mb));
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
  for (int64_t r = 0; r < N; ++r)  // rows are [s, b]: r % b is the sample
    if (r % d_.micro_batch < mb.counted && (mb.loss_mask.empty() || mb.loss_mask[size_t(r)] != 0))
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
  // A masked-out target adds nothing: its row's gradient is 0, run by run.
  for (int64_t r = 0; r < int64_t(mb.loss_mask.size());) {
    int64_t end = r;
    while (end < N && mb.loss_mask[size_t(end)] == 0) ++end;
    if (end > r) ops::fill(dev_, st.logits.f32() + r * V, (end - r) * V, 0);
    r = end + 1;
  }
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
  parts_.norm->backward(dln, st.acts[size_t(chunk_.layers)][kActLayerInput].ptr(), st.lnf, params_.lnf_w(),
                        params_.lnf_b(), dres);
  st.lnf.release();
}

}  // namespace mh
