#include "engine/params.hpp"

#include <megahost/rng.hpp>

#include <cmath>

#include "engine/ops.hpp"

namespace mh {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

ParamSet::ParamSet(Device& device, const ModelDims& dims, const MH_TensorPlan& plan, uint64_t seed,
                   const OwnedParts& owned, int64_t pad_to, bool master_weights)
    : dims_(dims), pad_to_(pad_to), layers_(size_t(dims.layers)), device_(device) {
  const int64_t h = dims.hidden, f = dims.ffn;
  const float std = dims.init_std;
  // Output projections of the residual branches start smaller so the
  // residual stream's variance does not grow with depth (GPT-2, Megatron).
  const float out_std = std / std::sqrt(2.0f * float(dims.layers));
  auto sharded = [&](MH_Weight w) { return plan.shard[w]; };
  auto bias_shard = [&](MH_Weight w) { return sharded(w) == MH_SHARD_ROWS ? MH_SHARD_COLS : MH_SHARD_NONE; };
  if (owned.embedding || owned.head)
    wte_ = add("wte", dims.vocab, h, sharded(MH_W_EMBEDDING), ParamGroup::kShardedDecay, std, 0);
  if (owned.embedding) wpe_ = add("wpe", dims.seq, h, MH_SHARD_NONE, ParamGroup::kReplicatedDecay, std, 0);
  for (int64_t l : owned.layers) {
    std::string p = "layers." + std::to_string(l) + ".";
    LayerParamIds& ids = layers_[size_t(l)];
    ids.ln1_w = add(p + "ln1_w", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
    ids.ln1_b = add(p + "ln1_b", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
    ids.qkv_w = add(p + "qkv_w", 3 * h, h, sharded(MH_W_QKV), ParamGroup::kShardedDecay, std, 0);
    ids.qkv_b = add(p + "qkv_b", 1, 3 * h, bias_shard(MH_W_QKV), ParamGroup::kShardedNoDecay, 0, 0);
    ids.proj_w = add(p + "proj_w", h, h, sharded(MH_W_PROJ), ParamGroup::kShardedDecay, out_std, 0);
    ids.proj_b = add(p + "proj_b", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
    ids.ln2_w = add(p + "ln2_w", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
    ids.ln2_b = add(p + "ln2_b", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
    ids.fc1_w = add(p + "fc1_w", f, h, sharded(MH_W_FC1), ParamGroup::kShardedDecay, std, 0);
    ids.fc1_b = add(p + "fc1_b", 1, f, bias_shard(MH_W_FC1), ParamGroup::kShardedNoDecay, 0, 0);
    ids.fc2_w = add(p + "fc2_w", h, f, sharded(MH_W_FC2), ParamGroup::kShardedDecay, out_std, 0);
    ids.fc2_b = add(p + "fc2_b", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
  }
  if (owned.head) {
    lnf_w_ = add("lnf_w", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 1);
    lnf_b_ = add("lnf_b", 1, h, MH_SHARD_NONE, ParamGroup::kReplicatedNoDecay, 0, 0);
  }
  layout();

  const int64_t n = groups_.back().offset + groups_.back().count;
  const int32_t compute = device.info().compute_dtype;
  if (master_weights || compute == MH_F32) {
    values_ = Buffer(device, MemCategory::kParams, n);
    ops::fill(device, values_.f32(), n, 0);
  }
  grads_ = Buffer(device, MemCategory::kGrads, n);
  if (compute != MH_F32) {
    gemm_copy_ = Buffer(device, MemCategory::kParams, n, compute);
    if (!holds_master()) ops::fill(device, gemm_copy_.ptr(), n, 0);  // the padding
  }
  upload_initial_values(seed);
  refresh_gemm_weights();
}

// Without values, each parameter passes through an f32 buffer of its own
// size on its way to the compute dtype.
void ParamSet::upload_initial_values(uint64_t seed) {
  if (device_.info().dry) return;
  std::vector<float> host;
  for (size_t id = 0; id < infos_.size(); ++id) {
    initial_values(int(id), seed, host);
    if (holds_master()) {
      device_.to_device(value(int(id)), host.data(), host.size() * sizeof(float));
      continue;
    }
    Buffer staged(device_, MemCategory::kWorkspace, int64_t(host.size()));
    device_.to_device(staged.data(), host.data(), host.size() * sizeof(float));
    ops::copy(device_, staged.ptr(), gemm_weight(int(id)), int64_t(host.size()));
  }
}

TypedPtr ParamSet::gemm_weight(int id) const {
  if (!gemm_copy_) return value(id);
  return gemm_copy_.ptr() + infos_[id].offset;
}

void ParamSet::refresh_gemm_weights() {
  if (gemm_copy_ && holds_master()) ops::copy(device_, values_.ptr(), gemm_copy_.ptr(), values_.numel());
}

int ParamSet::add(std::string name, int64_t global_rows, int64_t global_cols, int32_t shard, ParamGroup group,
                  float init_std, float init_value) {
  ParamInfo p{std::move(name), global_rows, global_cols, global_rows, global_cols, shard, group, init_std, init_value};
  if (shard == MH_SHARD_ROWS) p.rows /= dims_.tp;
  if (shard == MH_SHARD_COLS) p.cols /= dims_.tp;
  infos_.push_back(std::move(p));
  return int(infos_.size()) - 1;
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
  const int64_t row0 = p.shard == MH_SHARD_ROWS ? dims_.tp_rank * p.rows : 0;
  const int64_t col0 = p.shard == MH_SHARD_COLS ? dims_.tp_rank * p.cols : 0;
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      out[size_t(r * p.cols + c)] =
          p.init_std * rng::normal(key, uint64_t((row0 + r) * p.global_cols + col0 + c));
}

}  // namespace mh
