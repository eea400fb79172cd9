#include "training_cost.hpp"

#include <megahost/model_flops.hpp>

#include <algorithm>
#include <map>

#include "op_pricer.hpp"
#include "recompute_cost.hpp"

namespace mh::tuner {

namespace {

struct MicroBatchWork {
  Seconds first, middle, last;  // one micro-batch through the first, a middle and the last stage
};

// The recomputation of the middle stages: the slowest of them, or with no
// middle stage the first's (the ends add their own work).
Seconds middle_recompute(const std::vector<Seconds>& stages) {
  const Seconds* out = &stages.front();
  for (size_t s = 1; s + 1 < stages.size(); ++s)
    if (s == 1 || stages[s].total() > out->total()) out = &stages[s];
  return *out;
}

MicroBatchWork micro_batch_work(const Machine& mc, const Model& model, const Layout& l, const Placement& w,
                                Sharing sharing, const KeepTable& keep, StepCost& cost) {
  Pricer pr(mc, model, l, w, sharing);
  pr.layer_forward();
  cost.layer_forward = pr.take();
  pr.layer_backward();
  cost.layer_backward = pr.take();
  const std::vector<Seconds> recompute = stage_recompute(pr, model, l, keep);
  const double stage_layers = double(l.layers_per_chunk(model) * l.v);
  cost.layer_recompute = recompute.front() * (1 / stage_layers);
  Seconds layers = cost.layer_forward;
  layers += cost.layer_backward;
  layers = layers * stage_layers;
  // Activations forward and gradients backward across each chunk boundary.
  const int64_t rows = w.scatter_gather ? pr.n / l.t : pr.nl;
  if (l.p > 1) layers.comm += 2.0 * l.v * mc.collective_seconds(Coll::kSendRecv, pr.act(rows * pr.h), 2, w.pp_level);
  pr.embedding_forward_backward();
  const Seconds embedding = pr.take();
  pr.head_forward_backward();
  const Seconds head = pr.take();
  MicroBatchWork out{layers, layers, layers};
  out.first += recompute.front();
  out.middle += middle_recompute(recompute);
  out.last += recompute.back();
  out.first += embedding;
  out.last += head;
  if (l.p == 1) out.first += head;
  return out;
}

Seconds slowest_stage(const Machine& mc, const Model& model, const Layout& l, const Placement& w, Sharing sharing,
                      const KeepTable& keep, StepCost& cost) {
  const MicroBatchWork work = micro_batch_work(mc, model, l, w, sharing, keep, cost);
  const Seconds* slowest = &work.first;
  for (const Seconds* s : {&work.middle, &work.last})
    if (s->total() > slowest->total()) slowest = s;
  return *slowest;
}

// The schedule as a wavefront of chunk slots (1/v of a micro-batch's stage
// time each): m v + p - 1 of them, in slot j the stages s with
// 0 <= j - s < m v computing. Filling and draining, fewer stages compute,
// which on a shared device can run faster than at its full load.
double schedule_seconds(const Machine& mc, const Model& model, const Layout& l, const Placement& w,
                        const KeepTable& keep, StepCost& cost) {
  const int64_t chunks = l.microbatches(model) * l.v;
  std::map<int32_t, double> stage_seconds;  // by busy ranks
  double out = 0;
  for (int64_t j = 0; j < chunks + l.p - 1; ++j) {
    const int32_t busy_stages = int32_t(std::min<int64_t>({j + 1, l.p, chunks, chunks + l.p - 1 - j}));
    const Sharing sharing = w.busy_stages(busy_stages, l.p);
    auto [it, fresh] = stage_seconds.try_emplace(sharing.busy, 0.0);
    if (fresh) it->second = slowest_stage(mc, model, l, w, sharing, keep, cost).total();
    out += it->second / double(l.v);
  }
  return out;
}

// The distributed optimizer over the `group` ranks that hold the same `p`
// parameters: gradients reduce-scattered, the norm and AdamW over this
// rank's 1/group (then its master weights rounded into the parameters), the
// parameters all-gathered in the compute dtype. With the gather overlapped,
// the next forward's compute hides up to its length.
Seconds distributed_step(const Machine& mc, const Layout& l, const Placement& w, double p, int32_t group,
                         double forward_compute) {
  const Sharing all = w.busy_stages(l.p, l.p);
  const double shard = p / double(group);
  Seconds out;
  out.comm += mc.collective_seconds(Coll::kReduceScatter, p * kFp32, group, w.dp_level);
  out.vector += mc.vector_seconds("sum_squares", shard, all);
  out.comm += mc.collective_seconds(Coll::kAllReduce, kFp32, group, w.dp_level);  // the norm's sum
  out.vector += mc.vector_seconds("adamw", shard, all);
  out.vector += mc.vector_seconds("elementwise", shard, all);
  const double gather = mc.collective_seconds(Coll::kAllGather, p * mc.element_bytes(), group, w.dp_level);
  out.comm += l.overlap_param_gather ? std::max(0.0, gather - forward_compute) : gather;
  return out;
}

// The plain optimizer: gradients all-reduced over the `group` ranks holding
// the same `p` parameters, then the norm and AdamW.
Seconds replicated_step(const Machine& mc, const Layout& l, const Placement& w, double p, int32_t group) {
  const Sharing all = w.busy_stages(l.p, l.p);
  Seconds out;
  out.comm += mc.collective_seconds(Coll::kAllReduce, p * kFp32, group, w.dp_level);
  out.vector += mc.vector_seconds("sum_squares", p, all);
  out.vector += mc.vector_seconds("adamw", p, all);
  return out;
}

// Gradient reductions, norm and AdamW once per step on the biggest stage;
// `forward_compute`: one micro-batch's forward through a stage's layers.
// The weights every replica holds reduce over the data group (with its
// context ranks); a mixture's routed experts over the d cp t / ep ranks
// that hold the same experts (Megatron-Core's expert-data group).
Seconds step_end(const Machine& mc, const Model& model, const Layout& l, const Placement& w, double forward_compute) {
  int64_t params = 0;
  for (int32_t stage = 0; stage < l.p; ++stage) params = std::max(params, params_per_rank(model, l, stage));
  const double experts = double(routed_expert_params(model, l));
  const double dense = double(params) - double(active_expert_params(model, l));
  const Sharing all = w.busy_stages(l.p, l.p);
  Seconds out;
  out.vector += mc.vector_seconds("elementwise", dense + experts, all);  // zero the gradients
  if (l.sp && l.t > 1) {
    // Layernorm and row-parallel bias gradients saw one sequence shard
    // each, as did a mixture's router and shared experts.
    const int64_t moe = model.moe() ? model.experts + 3 * model.shared_experts * model.shared_ffn : 0;
    const double replicated = double(model.layers / l.p) * double(6 + moe) * double(model.hidden);
    out.comm += mc.collective_seconds(Coll::kAllReduce, replicated * kFp32, l.t, w.tp_level);
  }
  const int32_t expert_group = l.expert_ranks() / l.ep;
  if (l.distributed_optimizer) {
    out += distributed_step(mc, l, w, dense, l.data_group(), forward_compute);
    if (experts > 0) out += distributed_step(mc, l, w, experts, expert_group, forward_compute);
    return out;
  }
  out += replicated_step(mc, l, w, dense, l.data_group());
  if (experts > 0) out += replicated_step(mc, l, w, experts, expert_group);
  return out;
}

}  // namespace

StepCost training_step(const Machine& machine, const Model& model, const Layout& l, const Placement& w,
                       const KeepTable& keep) {
  StepCost cost;
  const double pipeline = schedule_seconds(machine, model, l, w, keep, cost);
  // Last, so the per-layer costs reported are those at full load.
  cost.stage = slowest_stage(machine, model, l, w, w.busy_stages(l.p, l.p), keep, cost);
  cost.bubble_slots = double(l.p - 1) / double(l.v);
  const double forward_compute =
      (cost.layer_forward.gemm + cost.layer_forward.vector) * double(l.layers_per_chunk(model) * l.v);
  cost.step_end = step_end(machine, model, l, w, forward_compute);
  cost.step_seconds = pipeline + cost.step_end.total();
  return cost;
}

double model_flops(const Model& m) {
  return mh::model_flops({m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.seq, m.vocab, m.gated, m.head_dim()},
                         m.global_batch);
}

// A SwiGLU expert's weights: FC1 (gate and up) and FC2.
int64_t routed_expert_params(const Model& m, const Layout& l) {
  if (!m.moe()) return 0;
  return m.layers / l.p * (m.experts / l.ep) * 3 * m.hidden * m.moe_ffn;
}

int64_t active_expert_params(const Model& m, const Layout& l) {
  if (!m.moe()) return 0;
  return m.layers / l.p * m.router_topk * 3 * m.hidden * m.moe_ffn;
}

int64_t params_per_rank(const Model& m, const Layout& l, int32_t stage) {
  const int64_t h = m.hidden, f = m.ffn, t = l.t, q = m.qkv(), f1 = m.fc1();
  // The mixture's experts are whole on each tensor rank.
  const int64_t tm = m.moe() ? 1 : t;
  // Norms and biases counted as GPT-2's (a few h per layer); a Llama-style
  // model has fewer, which moves nothing the tuner decides.
  const int64_t layer = 4 * h + (q * h + q) / t + h * m.attention_width() / t + h + (f1 * h + f1) / tm + h * f / tm + h;
  int64_t out = layer * (m.layers / l.p);
  if (stage == 0 || stage == l.p - 1) out += m.vocab / t * h;  // the embedding, or its tied copy, or lm_head
  if (stage == 0 && !m.rotary) out += m.seq * h;
  if (stage == 0 && stage == l.p - 1 && m.untied) out += m.vocab / t * h;
  if (stage == l.p - 1) out += 2 * h;
  return out;
}

}  // namespace mh::tuner
