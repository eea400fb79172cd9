#include "engine/params.hpp"

#include <megahost/rng.hpp>

#include <cmath>
#include <string_view>

#include "engine/ops.hpp"
#include "engine/tensor_weights.hpp"

namespace mh {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

ParamSet::ParamSet(Device& device, const ModelDims& dims, const MH_TensorPlan& plan, uint64_t seed,
                   const OwnedParts& owned, ParamStorage storage)
    : dims_(dims), pad_to_(storage.pad_to), layers_(size_t(dims.layers)), device_(device) {
  const int64_t h = dims.hidden;
  const MH_ShardDim vocab_shard = weight_shard(plan, "embedding");
  const bool tied = dims.spec.tie_embeddings;
  if (owned.embedding || (owned.head && tied))
    wte_ = add("wte", dims.vocab, h, vocab_shard, ParamGroup::kShardedDecay, dims.init_std, 0);
  tied_copy_ = tied && owned.head && !owned.embedding;
  if (owned.embedding && dims.spec.position == Position::kLearned)
    wpe_ = add("wpe", dims.seq, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, dims.init_std, 0);
  for (int64_t l : owned.layers) add_layer(l, plan);
  if (owned.head) {
    add_norm("lnf", lnf_w_, lnf_b_);
    head_w_ = tied ? wte_ : add("lm_head", dims.vocab, h, vocab_shard, ParamGroup::kShardedDecay, dims.init_std, 0);
  }
  layout();

  const int64_t n = numel_ = groups_.back().offset + groups_.back().count;
  const GroupRange adapters = group(ParamGroup::kAdapterReplicated);
  trainable_numel_ = dims.lora.on() ? adapters.offset + adapters.count : n;
  const int32_t compute = device.info().compute_dtype;
  // In f32 the values are the weights; under mixed precision the master
  // weights of what trains.
  if (storage.master_weights || compute == MH_F32) {
    const int64_t held = compute == MH_F32 ? n : trainable_numel_;
    values_ = Buffer(device, MemCategory::kParams, held);
    ops::fill(device, values_.f32(), held, 0);
  }
  if (storage.gradients) grads_ = Buffer(device, MemCategory::kGrads, trainable_numel_);
  if (compute != MH_F32) {
    compute_copy_ = Buffer(device, MemCategory::kParams, n, compute);
    if (!holds_master()) ops::fill(device, compute_copy_.ptr(), n, 0);  // the padding
  }
  if (storage.initialize) upload_initial_values(seed);
  refresh_compute_copy();
  // The master weights start as the compute-dtype parameters widened, as
  // Megatron's do and as the distributed optimizer's do.
  if (storage.initialize && compute_copy_ && holds_master())
    ops::copy(device, compute_copy_.ptr(), values_.ptr(), values_.numel());
}

void ParamSet::add_norm(const std::string& name, int& w, int& b) {
  w = add(name + "_w", 1, dims_.hidden, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
  if (dims_.spec.norm == Norm::kLayerNorm)
    b = add(name + "_b", 1, dims_.hidden, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
}

// Column-parallel weights (QKV, gate, FC1) shard their output rows and bias;
// row-parallel ones (proj, FC2) their input columns, their bias replicated.
void ParamSet::add_layer(int64_t l, const MH_TensorPlan& plan) {
  const ModelDims& d = dims_;
  const int64_t h = d.hidden, f = d.ffn, qkv = (d.heads + 2 * d.kv()) * d.head_dim();
  // Output projections of the residual branches start smaller so the
  // residual stream's variance does not grow with depth (GPT-2, Megatron).
  const float std = d.init_std, out_std = std / std::sqrt(2.0f * float(d.layers));
  const std::string p = "layers." + std::to_string(l) + ".";
  LayerParamIds& ids = layers_[size_t(l)];
  auto linear = [&](const char* name, int64_t out, int64_t in, const char* weight, float init, int& w, int& b) {
    const int32_t shard = weight_shard(plan, weight);
    w = add(p + name + "_w", out, in, shard, ParamGroup::kShardedDecay, init, 0);
    if (!d.spec.bias && !(std::string_view(weight) == "attention.qkv" && d.spec.qkv_bias)) return;
    const bool column = shard == MH_SHARD_ROWS;
    b = add(p + name + "_b", 1, out, column ? MH_SHARD_COLS : MH_SHARD_NONE,
            column ? ParamGroup::kShardedNoDecay : ParamGroup::kReplicatedNoDecay, 0, 0);
  };
  add_norm(p + "ln1", ids.ln1_w, ids.ln1_b);
  linear("qkv", qkv, h, "attention.qkv", std, ids.qkv_w, ids.qkv_b);
  if (d.spec.qk_norm) {
    ids.q_norm_w = add(p + "q_norm_w", 1, d.head_dim(), MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
    ids.k_norm_w = add(p + "k_norm_w", 1, d.head_dim(), MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
    infos_[size_t(ids.q_norm_w)].per_head = infos_[size_t(ids.k_norm_w)].per_head = true;
  }
  linear("proj", h, d.attention_width(), "attention.proj", out_std, ids.proj_w, ids.proj_b);
  add_norm(p + "ln2", ids.ln2_w, ids.ln2_b);
  if (d.moe()) {
    // Experts are whole on every tensor rank (no tensor parallelism inside
    // them yet); the expert group splits them.
    const int64_t E = d.spec.experts, fe = d.moe_ffn;
    ids.router_w = add(p + "router_w", E, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, std, 0);
    ids.gate_w = add_experts(p + "gate_w", fe, h, std);
    ids.fc1_w = add_experts(p + "fc1_w", fe, h, std);
    ids.fc2_w = add_experts(p + "fc2_w", h, fe, out_std);
    if (const int64_t fs = d.shared_width(); fs > 0) {
      ids.shared_gate_w = add(p + "shared_gate_w", fs, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, std, 0);
      ids.shared_fc1_w = add(p + "shared_fc1_w", fs, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, std, 0);
      ids.shared_fc2_w = add(p + "shared_fc2_w", h, fs, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, out_std, 0);
      if (d.spec.shared_expert_gate)
        ids.shared_expert_gate_w =
            add(p + "shared_expert_gate_w", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, std, 0);
    }
  } else {
    if (d.spec.activation == MlpActivation::kSwiglu) linear("gate", f, h, "mlp.gate", std, ids.gate_w, ids.gate_b);
    linear("fc1", f, h, "mlp.fc1", std, ids.fc1_w, ids.fc1_b);
    linear("fc2", h, f, "mlp.fc2", out_std, ids.fc2_w, ids.fc2_b);
  }
  const LoraSpec& lora = d.lora;
  if (lora.targets_any(kLoraQkv)) ids.qkv_lora = add_lora(p + "qkv", qkv, h, weight_shard(plan, "attention.qkv"));
  if (lora.targets_any(kLoraProj))
    ids.proj_lora = add_lora(p + "proj", h, d.attention_width(), weight_shard(plan, "attention.proj"));
  if (d.moe()) return;  // adapters inside the experts are not built yet: attention's only
  if (lora.targets_any(kLoraGate) && ids.gate_w >= 0)
    ids.gate_lora = add_lora(p + "gate", f, h, weight_shard(plan, "mlp.gate"));
  if (lora.targets_any(kLoraFc1)) ids.fc1_lora = add_lora(p + "fc1", f, h, weight_shard(plan, "mlp.fc1"));
  if (lora.targets_any(kLoraFc2)) ids.fc2_lora = add_lora(p + "fc2", h, f, weight_shard(plan, "mlp.fc2"));
}

// Split as Megatron's ParallelLinearAdapter splits it: beside a
// column-parallel base (output rows sharded) A is replicated and B split by
// output rows; beside a row-parallel one (input columns sharded) A is split
// by input columns and B replicated. A starts with the variance of PEFT's
// Kaiming-uniform init (a = sqrt(5): 1 / (3 in)), B at zero, so the adapted
// model starts as the base.
LoraIds ParamSet::add_lora(const std::string& name, int64_t out, int64_t in, int32_t shard) {
  const int64_t r = dims_.lora.rank;
  const int32_t a_shard = shard == MH_SHARD_COLS ? MH_SHARD_COLS : MH_SHARD_NONE;
  const int32_t b_shard = shard == MH_SHARD_ROWS ? MH_SHARD_ROWS : MH_SHARD_NONE;
  auto group = [](int32_t s) { return s == MH_SHARD_NONE ? ParamGroup::kAdapterReplicated : ParamGroup::kAdapterSharded; };
  LoraIds ids;
  ids.a = add(name + "_lora_a", r, in, a_shard, group(a_shard), 1.0f / std::sqrt(3.0f * float(in)), 0);
  ids.b = add(name + "_lora_b", out, r, b_shard, group(b_shard), 0, 0);
  infos_[size_t(ids.a)].adapter = infos_[size_t(ids.b)].adapter = true;
  return ids;
}

std::vector<int> LayerParamIds::ids() const {
  std::vector<int> out;
  for (int id : {shared_fc2_w, shared_expert_gate_w, shared_fc1_w, shared_gate_w, fc2_lora.b, fc2_lora.a, fc2_w, fc2_b,
                 fc1_lora.b, fc1_lora.a, fc1_w, fc1_b, gate_lora.b, gate_lora.a, gate_w, gate_b, router_w, ln2_w, ln2_b,
                 proj_lora.b, proj_lora.a, proj_w, proj_b, k_norm_w, q_norm_w, qkv_lora.b, qkv_lora.a, qkv_w, qkv_b,
                 ln1_w, ln1_b})
    if (id >= 0) out.push_back(id);
  return out;
}

std::vector<int> ParamSet::head_ids() const {
  std::vector<int> out;
  for (int id : {lnf_w_, lnf_b_, head_w_})
    if (id >= 0) out.push_back(id);
  return out;
}

std::vector<int> ParamSet::embedding_ids() const {
  std::vector<int> out;
  for (int id : {wpe_, wte_})
    if (id >= 0) out.push_back(id);
  return out;
}

int ParamSet::wte_uses() const {
  const bool input = wte_ >= 0 && !tied_copy_, output = head_w_ >= 0 && head_w_ == wte_;
  return int(input) + int(output);
}

// Without values (or a frozen base's), each parameter passes through an f32 buffer of its own
// size on its way to the compute dtype.
void ParamSet::upload_initial_values(uint64_t seed) {
  if (device_.info().dry) return;
  std::vector<float> host;
  for (size_t id = 0; id < infos_.size(); ++id) {
    initial_values(int(id), seed, host);
    upload(int(id), host);
  }
}

void ParamSet::upload(int id, const std::vector<float>& host) {
  if (holds_master() && infos_[id].offset < values_.numel()) {
    device_.to_device(value(id), host.data(), host.size() * sizeof(float));
    return;
  }
  Buffer staged(device_, MemCategory::kWorkspace, int64_t(host.size()));
  device_.to_device(staged.data(), host.data(), host.size() * sizeof(float));
  ops::copy(device_, staged.ptr(), weight(id), int64_t(host.size()));
}

TypedPtr ParamSet::weight(int id) const {
  if (!compute_copy_) return value(id);
  return compute_copy_.ptr() + infos_[id].offset;
}

void ParamSet::refresh_compute_copy() {
  if (compute_copy_ && holds_master()) ops::copy(device_, values_.ptr(), compute_copy_.ptr(), values_.numel());
}

int ParamSet::add(std::string name, int64_t global_rows, int64_t global_cols, int32_t shard, ParamGroup group,
                  float init_std, float init_value) {
  ParamInfo p{std::move(name), global_rows, global_cols, global_rows, global_cols, 0, 0, shard, group, init_std,
              init_value};
  if (shard == MH_SHARD_ROWS) p.rows /= dims_.tp;
  if (shard == MH_SHARD_COLS) p.cols /= dims_.tp;
  if (shard == MH_SHARD_ROWS) p.row0 = dims_.tp_rank * p.rows;
  if (shard == MH_SHARD_COLS) p.col0 = dims_.tp_rank * p.cols;
  infos_.push_back(std::move(p));
  return int(infos_.size()) - 1;
}

int ParamSet::add_experts(std::string name, int64_t rows_per_expert, int64_t cols, float init_std) {
  const int id = add(std::move(name), dims_.spec.experts * rows_per_expert, cols, MH_SHARD_NONE,
                     ParamGroup::kExpertDecay, init_std, 0);
  ParamInfo& p = infos_[size_t(id)];
  p.rows = dims_.local_experts() * rows_per_expert;
  p.row0 = dims_.first_expert() * rows_per_expert;
  return id;
}

void ParamSet::layout() {
  int64_t offset = 0;
  for (size_t g = 0; g < kParamGroups; ++g) {
    groups_[g].offset = offset;
    for (auto& p : infos_) {
      if (static_cast<size_t>(p.group) != g) continue;
      p.offset = offset;
      offset += slot(int(&p - infos_.data()));
    }
    groups_[g].count = offset - groups_[g].offset;
  }
}

void ParamSet::initial_values(int id, uint64_t seed, std::vector<float>& out) const {
  const ParamInfo& p = infos_[id];
  out.assign(size_t(p.numel()), p.init_value);
  if (p.init_std == 0) return;
  const uint64_t key = seed * 0x9E3779B97F4A7C15ull ^ fnv1a(p.name);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      out[size_t(r * p.cols + c)] =
          p.init_std * rng::normal(key, uint64_t((p.row0 + r) * p.global_cols + p.col0 + c));
}

}  // namespace mh
