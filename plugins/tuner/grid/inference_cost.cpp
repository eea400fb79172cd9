#include "inference_cost.hpp"

#include "op_pricer.hpp"
#include "training_cost.hpp"

namespace mh::tuner {
namespace {

// The prompt's forward through one stage: layers, then the output layer on
// the last stage (the first token). One request's stages compute one at a
// time.
double prefill_stage_seconds(const Machine& mc, Model model, const Layout& l, const Placement& w, int64_t prompt) {
  model.seq = prompt;
  Pricer pr(mc, model, l, w, w.busy_stages(1, l.p), false);
  pr.layer_forward();
  const double layers = pr.take().total() * double(model.layers / l.p);
  pr.gemm(1, l.b, pr.V, pr.h);
  return layers + pr.take().total();
}

// One new token per sequence through one stage, attending to `context`
// cached positions: every weight and the cache are read once.
double decode_stage_seconds(const Machine& mc, const Model& model, const Layout& l, const Placement& w,
                            int64_t context) {
  Pricer pr(mc, model, l, w, w.busy_stages(1, l.p), false);
  const int64_t b = l.b, h = pr.h, hl = pr.hl, fl = pr.fl, g = pr.g;
  pr.vec("layernorm", b * h);
  pr.gemm(1, b, pr.ql, h);
  pr.gemm(g, 1, context, pr.dh);
  pr.vec("softmax", g * context);
  pr.gemm(g, 1, pr.dh, context);
  pr.gemm(1, b, h, hl);
  if (l.t > 1) pr.tp(Coll::kAllReduce, pr.act(b * h));
  pr.vec("layernorm", b * h);
  pr.gemm(1, b, pr.f1l, h);
  pr.vec("gelu", b * fl);
  pr.gemm(1, b, h, fl);
  if (l.t > 1) pr.tp(Coll::kAllReduce, pr.act(b * h));
  const double layers = pr.take().total() * double(model.layers / l.p);
  pr.gemm(1, b, pr.V, h);
  return layers + pr.take().total();
}

uint64_t memory_per_rank(const Machine& mc, const Model& m, const Layout& l, const InferenceRequest& r) {
  const double e = mc.element_bytes();
  const double weights = double(params_per_rank(m, l, 0)) * e;
  // K and V of the key/value heads only: grouped-query attention's saving.
  const double cache = 2.0 * double(m.layers / l.p) * double(l.b) * double(r.prompt + r.output) *
                       double(m.kv() * (m.hidden / m.heads) / l.t) * e;
  // The prompt's largest transients: scores and probabilities, the MLP's
  // inner activations and a few residual-stream tensors.
  const double rows = double(l.b * r.prompt);
  const double transients = 2 * double(l.b * m.heads / l.t) * double(r.prompt * r.prompt) * e +
                            2 * rows * double(m.fc1() / l.t) * e + 4 * rows * double(m.hidden) * e;
  return uint64_t(weights + cache + transients);
}

}  // namespace

InferenceCost inference(const Machine& mc, const Model& model, const Layout& l, const Placement& w,
                        const InferenceRequest& r) {
  const double hop = mc.collective_seconds(Coll::kSendRecv, double(l.b * model.hidden) * mc.element_bytes(), 2,
                                           w.pp_level);
  const double hops = double(l.p - 1) * hop;
  const double prefill = double(l.p) * prefill_stage_seconds(mc, model, l, w, r.prompt) +
                         double(l.p - 1) * mc.collective_seconds(Coll::kSendRecv,
                                                                 double(l.b * r.prompt * model.hidden) *
                                                                     mc.element_bytes(),
                                                                 2, w.pp_level);
  const double decode = double(l.p) * decode_stage_seconds(mc, model, l, w, r.prompt + r.output / 2) + hops;
  InferenceCost out;
  out.latency_seconds = prefill + double(r.output) * decode;
  out.tokens_per_s = double(l.d) * double(l.b * r.output) / out.latency_seconds;
  out.memory_bytes = memory_per_rank(mc, model, l, r);
  return out;
}

}  // namespace mh::tuner
