#include "inference_cost.hpp"

#include "op_pricer.hpp"
#include "training_cost.hpp"

namespace mh::tuner {
namespace {

// Attention of each sequence on its own (host/engine/parts/cached_attention):
// for each of the m = a / kv query heads of a key/value group, one product
// batched over the kv / t local groups, `rows` queries against `context`
// cached keys; one softmax over all of them; then P V the same way.
void attention(Pricer& pr, const Model& m, const Layout& l, int64_t rows, int64_t context) {
  const int64_t per_group = m.heads / m.kv(), groups = m.kv() / l.t;
  for (int64_t s = 0; s < l.b; ++s) {
    for (int64_t i = 0; i < per_group; ++i) pr.gemm(groups, rows, context, pr.dh);  // scores = Q K^T
    pr.vec("softmax", per_group * groups * rows * context);
    for (int64_t i = 0; i < per_group; ++i) pr.gemm(groups, rows, pr.dh, context);  // context = P V
  }
}

// One layer over the n = rows * b packed rows: column-parallel QKV, K and V
// copied into the cache, attention per sequence, row-parallel output with
// its all-reduce, then the MLP the same way (a mixture's router first, its
// whole experts at the active width on every tensor rank, with no
// all-reduce). No dropout in generation.
void layer(Pricer& pr, const Model& m, const Layout& l, int64_t rows, int64_t context) {
  const int64_t n = pr.n, h = pr.h, kv_width = pr.ql - pr.hl;
  auto exit_region = [&](bool region) {
    if (region && l.t > 1) pr.tp(Coll::kAllReduce, pr.act(n * h));
    pr.vec("bias_add", n * h);
    pr.vec("elementwise", n * h);  // the residual add
  };
  pr.vec("layernorm", n * h);
  pr.gemm(1, n, pr.ql, h);
  pr.vec("bias_add", n * pr.ql);
  pr.rope();
  pr.traffic(double(n * kv_width), 2);  // K and V into the cache
  attention(pr, m, l, rows, context);
  pr.gemm(1, n, h, pr.hl);
  exit_region(true);
  pr.vec("layernorm", n * h);
  pr.router_forward();
  pr.gemm(1, n, pr.f1l, h);
  pr.vec("bias_add", n * pr.f1l);
  pr.activation_forward();
  pr.gemm(1, n, h, pr.fl);
  exit_region(!m.moe());
}

// Token (and learned position) embeddings of the n rows, the
// vocabulary-parallel table's partial rows all-reduced over the tensor
// group.
void embeddings(Pricer& pr, const Model& m, const Layout& l) {
  pr.vec("embedding", pr.n * pr.h);
  if (l.t > 1) pr.tp(Coll::kAllReduce, pr.act(pr.n * pr.h));
  if (!m.rotary) pr.vec("embedding", pr.n * pr.h);
  pr.vec("elementwise", pr.n * pr.h);  // into the residual stream
}

// Each sequence's last row copied out, the final norm and output layer on
// those rows, their f32 logits of the local vocabulary gathered over the
// tensor group, and the host reordering the shards and reading every logit
// to sample (host/engine/decoder.cpp).
void head(Pricer& pr, const Machine& mc, const Layout& l) {
  const int64_t b = l.b;
  const double logits = double(b * pr.V * l.t);
  pr.vec("elementwise", b * pr.h);
  pr.vec("layernorm", b * pr.h);
  pr.gemm(1, b, pr.V, pr.h);
  if (l.t > 1) pr.tp(Coll::kAllGather, logits * kFp32);
  pr.traffic(logits * kFp32 / mc.element_bytes(), 3);
}

}  // namespace

double stage_forward_seconds(const Machine& mc, const Model& model, const Layout& l, const Placement& w, int64_t rows,
                             int64_t context, bool first, bool last) {
  Model per_row = model;
  per_row.seq = rows;  // the pricer's n = rows * b
  // One stage computes at a time: its t ranks busy, the others waiting.
  Pricer pr(mc, per_row, l, w, w.busy_stages(1, l.p), false);
  if (mc.shared_device()) {
    // What a rank reads per pass: its stage's weights and its KV cache up to
    // `context` positions of each sequence.
    const int32_t stage = first ? 0 : last ? l.p - 1 : std::min(1, l.p - 1);
    const double kv = 2.0 * double(model.layers / l.p) * double(l.b) * double(model.kv() / l.t) * double(context) *
                      double(pr.dh);
    pr.reading_from((double(params_per_rank(model, l, stage)) + kv) * mc.element_bytes());
  }
  if (first) embeddings(pr, model, l);
  const int64_t layers = model.layers / l.p;
  double seconds = pr.take().total();
  layer(pr, model, l, rows, context);
  seconds += pr.take().total() * double(layers);
  if (last) head(pr, mc, l);
  return seconds + pr.take().total();
}

// What the lead's word takes in one broadcast: its size and a few bytes, as
// f32 (host/generate/step_batch.cpp).
constexpr double kLeadWordBytes = 64 * kFp32;

InferenceCost inference(const Machine& mc, const Model& model, const Layout& l, const Placement& w,
                        const InferenceRequest& r) {
  const double e = mc.element_bytes();
  // The stages in turn, each handing its [rows, h] activations on; then
  // the sampled tokens from the last stage to every rank.
  auto pass = [&](int64_t rows, int64_t context) {
    // Each step starts with world rank 0's word broadcast to every rank (a
    // stop request; a server's plan): a collective's latency.
    double seconds = l.world() > 1 ? mc.collective_seconds(Coll::kAllGather, kLeadWordBytes * l.world(), l.world(),
                                                           w.pp_level)
                                   : 0;
    for (int32_t s = 0; s < l.p; ++s)
      seconds += stage_forward_seconds(mc, model, l, w, rows, context, s == 0, s == l.p - 1);
    if (l.p > 1) {
      seconds += double(l.p - 1) * mc.collective_seconds(Coll::kSendRecv, double(l.b * rows * model.hidden) * e, 2,
                                                        w.pp_level);
      // A broadcast of b f32 token ids over the pipeline group: its latency.
      seconds += mc.collective_seconds(Coll::kAllGather, double(l.b) * kFp32 * l.p, l.p, w.pp_level);
    }
    return seconds;
  };
  InferenceCost out;
  out.ttft_seconds = pass(r.prompt, r.prompt);
  // Decode step i attends to prompt + i positions, i = 1 .. output - 1.
  out.tpot_seconds = pass(1, r.prompt + r.output / 2);
  out.latency_seconds = out.ttft_seconds + double(r.output) * out.tpot_seconds;
  out.tokens_per_s = double(l.b * r.output) / out.latency_seconds;
  return out;
}

}  // namespace mh::tuner
