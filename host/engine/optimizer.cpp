#include "engine/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <megahost/error.hpp>

#include "engine/ops.hpp"

namespace mh {

double learning_rate(const AdamWConfig& c, int64_t step) {
  if (step <= c.warmup_steps) return c.lr * double(step) / double(std::max<int64_t>(1, c.warmup_steps));
  double span = double(std::max<int64_t>(1, c.decay_steps - c.warmup_steps));
  double progress = std::min(1.0, double(step - c.warmup_steps) / span);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

Optimizer::Optimizer(Device& device, ParamSet& params, const AdamWConfig& config, Collectives* data_group,
                     const std::vector<GroupRange>& ranges, Collectives* expert_data_group)
    : device_(device), params_(params), config_(config), data_(data_group), expert_data_(expert_data_group),
      ranges_(ranges) {
  require(distributed() || params_.holds_master(),
          "the parameters hold no master weights and no data group shards them");
  if (!distributed()) {
    owned_.push_back(Piece{0, 0, params_.trainable_numel()});
    owned_count_ = params_.trainable_numel();
  }
  for (size_t i = 0; distributed() && i < ranges_.size(); ++i) {
    Collectives& group = group_of(i);
    const int64_t per_rank = ranges_[i].count / group.size();
    owned_.push_back(Piece{ranges_[i].offset + group.rank() * per_rank, owned_count_, per_rank});
    owned_count_ += per_rank;
  }
  m_ = Buffer(device, MemCategory::kOptimizer, owned_count_);
  v_ = Buffer(device, MemCategory::kOptimizer, owned_count_);
  ops::fill(device, m_.f32(), owned_count_, 0);
  ops::fill(device, v_.f32(), owned_count_, 0);
  if (!params_.holds_master()) keep_master_weights();
}

// As Megatron does, the f32 master weights start as the parameters widened.
void Optimizer::keep_master_weights() {
  master_ = Buffer(device_, MemCategory::kOptimizer, owned_count_);
  for (const Piece& p : owned_) ops::copy(device_, params_.compute_copy() + p.flat, master_.f32() + p.local, p.count);
}

float* Optimizer::master_of(const Piece& p) const {
  return master_ ? master_.f32() + p.local : params_.values().f32() + p.flat;
}

std::vector<Optimizer::Piece> Optimizer::owned_within(GroupRange r) const {
  std::vector<Piece> parts;
  for (const Piece& o : owned_) {
    const int64_t begin = std::max(r.offset, o.flat), end = std::min(r.offset + r.count, o.flat + o.count);
    if (end > begin) parts.push_back(Piece{begin, o.local + (begin - o.flat), end - begin});
  }
  return parts;
}

Collectives& Optimizer::group_of(size_t range) const {
  if (!params_.experts(ranges_.at(range))) return *data_;
  require(expert_data_ != nullptr, "expert weights to shard, but no expert-data group");
  return *expert_data_;
}

PendingCollective Optimizer::reduce_scatter_start(size_t range) {
  float* grads = params_.grads().f32();
  return group_of(range).reduce_scatter_start(grads + ranges_[range].offset, grads + owned_.at(range).flat, owned_[range].count);
}

double Optimizer::grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups) {
  Buffer sum(device_, MemCategory::kWorkspace, 1);
  ops::fill(device_, sum.f32(), 1, 0);
  for (const GroupRange& range : ranges) {
    for (const Piece& p : owned_within(range)) {
      MH_SumSquaresArgs a{};
      a.x = view(params_.grads().f32() + p.flat, MH_F32, {p.count});
      a.out = sum.t({1});
      device_.run(&MH_KernelsApi::sum_squares, a, "sum_squares");
    }
  }
  for (Collectives* g : groups)
    if (g != nullptr && g->size() > 1) g->all_reduce(sum.f32(), 1);
  float host = 0;
  device_.to_host(&host, sum.data(), sizeof(float));
  return std::sqrt(double(host));
}

void Optimizer::step(int64_t step, double norm) {
  if (config_.clip_grad > 0 && norm > config_.clip_grad)
    for (const Piece& p : owned_)
      ops::scale(device_, params_.grads().f32() + p.flat, p.count, float(config_.clip_grad / (norm + 1e-6)));
  const double lr = learning_rate(config_, step);
  for (size_t g = 0; g < kParamGroups; ++g) {
    auto group = static_cast<ParamGroup>(g);
    bool decay = group != ParamGroup::kShardedNoDecay && group != ParamGroup::kReplicatedNoDecay;
    for (const Piece& p : owned_within(params_.group(group))) {
      MH_AdamWArgs a{};
      a.param = view(master_of(p), MH_F32, {p.count});
      a.grad = view(params_.grads().f32() + p.flat, MH_F32, {p.count});
      a.m = view(m_.f32() + p.local, MH_F32, {p.count});
      a.v = view(v_.f32() + p.local, MH_F32, {p.count});
      a.lr = float(lr);
      a.beta1 = float(config_.beta1);
      a.beta2 = float(config_.beta2);
      a.eps = float(config_.eps);
      a.weight_decay = decay ? float(config_.weight_decay) : 0.f;
      a.step = step;
      device_.run(&MH_KernelsApi::adamw, a, "adamw");
    }
  }
}

void Optimizer::publish() {
  round_master();
  const TypedPtr all = gathered();
  for (size_t r = 0; distributed() && r < ranges_.size(); ++r)
    group_of(r).all_gather(all + owned_[r].flat, all + ranges_[r].offset, owned_[r].count);
  params_.refresh_compute_copy();
}

void Optimizer::round_master() {
  if (master_)
    for (const Piece& p : owned_) ops::copy(device_, master_.f32() + p.local, params_.compute_copy() + p.flat, p.count);
}

// Distributed, the parameters hold either f32 values and no GEMM copy or
// only the copy, so refresh_compute_copy has nothing to do after a gather.
PendingCollective Optimizer::all_gather_start(size_t range) {
  const TypedPtr all = gathered();
  return group_of(range).all_gather_start(all + owned_.at(range).flat, all + ranges_[range].offset,
                                          owned_[range].count);
}

// Each rank's piece sits where the all-gather would put it, so the gather
// runs in place: on the compute-dtype copy when the optimizer keeps the
// master weights, else on the f32 values.
TypedPtr Optimizer::gathered() const {
  return master_ ? params_.compute_copy() : TypedPtr(params_.values().f32());
}

}  // namespace mh
