#include "engine/layer.hpp"

#include "engine/ops.hpp"
#include "engine/parts/lora.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// Inference keeps nothing for a backward: what the layer has read for the
// last time goes at once.
void done_with(LayerActivations& A, const LayerPass& pass, std::initializer_list<Activation> read) {
  if (!pass.inference) return;
  for (Activation a : read) A[a].release();
}

}  // namespace

// The rank's rows are one block of global rows, or with balanced context
// parallelism and no sequence shard its two chunks, a row each of the span
// (the setup keeps a sequence shard inside one chunk).
MH_RngSpan hidden_dropout_span(const ModelDims& d, uint64_t key, int64_t layer, DropoutSite site) {
  const uint64_t n = uint64_t(d.local_rows() * d.hidden), stream = dropout_stream(key, layer, site);
  const int64_t chunk_rows = d.chunk_len() * d.micro_batch, row = d.micro_batch * d.hidden;
  if (d.local_rows() <= chunk_rows) return MH_RngSpan{stream, uint64_t(d.global_row(d.first_local_row()) * d.hidden), n, n};
  return MH_RngSpan{stream, uint64_t(d.chunk_start(0) * row), uint64_t(chunk_rows * d.hidden),
                    uint64_t((d.chunk_start(1) - d.chunk_start(0)) * row)};
}

MH_RngSpan DecoderLayer::hidden_span(const LayerPass& pass, int64_t layer, DropoutSite site) const {
  return hidden_dropout_span(c_.d, pass.key, layer, site);
}

void DecoderLayer::forward(LayerActivations& A, int64_t layer, const LayerPass& pass, Buffer* next) const {
  const LayerParamIds& w = c_.params.layer(layer);
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  const TypedPtr x = A[kActLayerInput].ptr();
  const LoraDropout drop = lora_dropout(pass, layer);
  if (!A.has(kActLn1)) A[kActLn1] = parts_.norm->forward(x, w.ln1_w, w.ln1_b);
  attention_.forward(A, w, layer, pass);
  done_with(A, pass, {kActLn1, kActQkv, kActAttnScores, kActAttnMask, kActAttnProbs});
  if (!A.has(kActResidual1) || !A.has(kActAttnDropMask)) {
    if (!A.has(kActResidual1)) A[kActResidual1] = c_.activation(kAct, n * h);
    const auto project = [&](float* partial) {
      adapted_projection(c_, A[kActContext].ptr(), w.proj_w, w.proj_lora, drop, kLoraProj, partial,
                         c_.d.local_attention(), h);
    };
    residual_branch(A, layer, pass, kDropoutSiteAttention, project, true, w.proj_b, x, kActAttnDropMask,
                    A[kActResidual1].ptr());
  }
  done_with(A, pass, {kActContext, kActLayerInput});
  const TypedPtr mid = A[kActResidual1].ptr();
  if (!A.has(kActLn2)) A[kActLn2] = parts_.norm->forward(mid, w.ln2_w, w.ln2_b);
  parts_.mlp->forward(A, w, pass, drop);
  done_with(A, pass, {kActLn2, kActFc1});
  const bool write_next = next != nullptr && !*next;
  if (!write_next && A.has(kActMlpDropMask)) return;
  Buffer out = c_.activation(write_next ? kAct : kWork, n * h);
  residual_branch(A, layer, pass, kDropoutSiteMlp, [&](float* partial) { parts_.mlp->output(A, w, drop, partial); },
                  parts_.mlp->tensor_region(), w.fc2_b, mid, kActMlpDropMask, out.ptr());
  done_with(A, pass, {kActGelu, kActResidual1});
  if (write_next) *next = std::move(out);
}

// The GEMM's partial sums are f32 in every precision: the tensor group
// reduces them in f32, and the dropout rounds once, into `out`. Inference
// has no backward to keep the mask for.
void DecoderLayer::residual_branch(LayerActivations& A, int64_t layer, const LayerPass& pass, DropoutSite site,
                                   const Projection& project, bool region, int b, TypedPtr residual,
                                   Activation mask, TypedPtr out) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer partial(c_.dev, kWork, (region ? c_.d.rows() : n) * h), scratch;
  project(partial.f32());
  TypedPtr y = region ? c_.tp.exit_fwd(partial.f32(), scratch) : TypedPtr(partial.f32());
  if (b >= 0) ops::bias_add(c_.dev, y, c_.P(b), n, h);
  A[mask] = Buffer(c_.dev, pass.inference ? kWork : kAct, n * h, MH_U8);
  ops::dropout(c_.dev, y, residual, out, static_cast<uint8_t*>(A[mask].data()), n * h, pass.dropout,
               hidden_span(pass, layer, site));
  done_with(A, pass, {mask});
}

Buffer DecoderLayer::residual_branch_bwd(LayerActivations& A, const float* dres, const ProjectionBwd& project_bwd,
                                         bool region, int b, Activation mask) const {
  const int64_t n = c_.d.local_rows(), h = c_.d.hidden;
  Buffer dloc = c_.activation(kWork, n * h), scratch;
  ops::dropout_bwd(c_.dev, dres, static_cast<uint8_t*>(A[mask].data()), dloc.ptr(), n * h, c_.d.dropout);
  if (b >= 0) ops::bias_bwd(c_.dev, dloc.ptr(), c_.G(b), n, h);
  return project_bwd(region ? c_.tp.exit_bwd(dloc.ptr(), scratch) : dloc.ptr());
}

// Activation gradients are in the compute dtype where GEMMs read them; the
// residual stream's gradient `dres` and the input gradients of column-parallel
// GEMMs (reduced across the tensor group) stay f32.
void DecoderLayer::backward(LayerActivations& A, int64_t layer, const LayerPass& pass, float* dres) const {
  const LayerParamIds& w = c_.params.layer(layer);
  Buffer dfull(c_.dev, kWork, c_.d.rows() * c_.d.hidden), scratch;
  const LoraDropout drop = lora_dropout(pass, layer);

  const bool region = parts_.mlp->tensor_region();
  Buffer dact = residual_branch_bwd(
      A, dres, [&](TypedPtr dy) { return parts_.mlp->output_bwd(A, w, drop, dy); }, region, w.fc2_b,
      kActMlpDropMask);
  parts_.mlp->backward(A, w, drop, dact, dfull);
  dact.release();
  parts_.norm->backward(region ? c_.tp.enter_bwd(dfull.f32(), scratch) : TypedPtr(dfull.f32()),
                        A[kActResidual1].ptr(), A[kActLn2], w.ln2_w, w.ln2_b, dres);

  Buffer dctx = residual_branch_bwd(
      A, dres,
      [&](TypedPtr dy) {
        return adapted_projection_bwd(c_, A[kActContext].ptr(), w.proj_w, w.proj_lora, drop, kLoraProj, dy,
                                      c_.d.local_attention(), c_.d.hidden);
      },
      true, w.proj_b, kActAttnDropMask);
  attention_.backward(A, w, layer, pass, dctx.ptr(), dfull);
  dctx.release();
  parts_.norm->backward(c_.tp.enter_bwd(dfull.f32(), scratch), A[kActLayerInput].ptr(), A[kActLn1], w.ln1_w,
                        w.ln1_b, dres);
}

}  // namespace mh
