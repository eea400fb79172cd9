#include "engine/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/ops.hpp"

namespace mh {

double learning_rate(const AdamWConfig& c, int64_t step) {
  if (step <= c.warmup_steps) return c.lr * double(step) / double(std::max<int64_t>(1, c.warmup_steps));
  double span = double(std::max<int64_t>(1, c.decay_steps - c.warmup_steps));
  double progress = std::min(1.0, double(step - c.warmup_steps) / span);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

Optimizer::Optimizer(Device& device, ParamSet& params, const AdamWConfig& config, Collectives* data_group)
    : device_(device), params_(params), config_(config), data_(data_group) {
  const int64_t n = owned().count;
  m_ = Buffer(device, MemCategory::kOptimizer, n);
  v_ = Buffer(device, MemCategory::kOptimizer, n);
  ops::fill(device, m_.f32(), n, 0);
  ops::fill(device, v_.f32(), n, 0);
  if (distributed()) {
    shard_grads_ = Buffer(device, MemCategory::kGrads, n);
    staging_ = Buffer(device, MemCategory::kComm, n);
  }
}

GroupRange Optimizer::owned() const {
  if (!distributed()) return GroupRange{0, params_.numel()};
  const int64_t shard = params_.numel() / data_->size();
  return GroupRange{data_->rank() * shard, shard};
}

GroupRange Optimizer::clip(GroupRange r) const {
  const GroupRange o = owned();
  const int64_t begin = std::max(r.offset, o.offset), end = std::min(r.offset + r.count, o.offset + o.count);
  return end > begin ? GroupRange{begin, end - begin} : GroupRange{begin, 0};
}

void Optimizer::reduce_scatter_gradients() {
  data_->reduce_scatter(params_.grads().f32(), shard_grads_.f32(), owned().count);
}

double Optimizer::grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups) {
  Buffer sum(device_, MemCategory::kWorkspace, 1);
  ops::fill(device_, sum.f32(), 1, 0);
  for (const GroupRange& range : ranges) {
    const GroupRange r = clip(range);
    if (r.count == 0) continue;
    MH_SumSquaresArgs a{};
    a.x = view(grads() + (r.offset - owned().offset), MH_F32, {r.count});
    a.out = sum.t({1});
    device_.run(&MH_KernelsApi::sum_squares, a, "sum_squares");
  }
  for (Collectives* g : groups)
    if (g->size() > 1) g->all_reduce(sum.f32(), 1);
  if (distributed() && data_->size() > 1) data_->all_reduce(sum.f32(), 1);
  float host = 0;
  device_.to_host(&host, sum.data(), sizeof(float));
  return std::sqrt(double(host));
}

void Optimizer::step(int64_t step, double norm) {
  const GroupRange mine = owned();
  if (config_.clip_grad > 0 && norm > config_.clip_grad)
    ops::scale(device_, grads(), mine.count, float(config_.clip_grad / (norm + 1e-6)));
  const double lr = learning_rate(config_, step);
  for (size_t g = 0; g < kParamGroups; ++g) {
    auto group = static_cast<ParamGroup>(g);
    const GroupRange r = clip(params_.group(group));
    if (r.count == 0) continue;
    const int64_t local = r.offset - mine.offset;
    bool decay = group == ParamGroup::kShardedDecay || group == ParamGroup::kReplicatedDecay;
    MH_AdamWArgs a{};
    a.param = view(params_.values().f32() + r.offset, MH_F32, {r.count});
    a.grad = view(grads() + local, MH_F32, {r.count});
    a.m = view(m_.f32() + local, MH_F32, {r.count});
    a.v = view(v_.f32() + local, MH_F32, {r.count});
    a.lr = float(lr);
    a.beta1 = float(config_.beta1);
    a.beta2 = float(config_.beta2);
    a.eps = float(config_.eps);
    a.weight_decay = decay ? float(config_.weight_decay) : 0.f;
    a.step = step;
    device_.run(&MH_KernelsApi::adamw, a, "adamw");
  }
  if (distributed()) {
    // Staged: a collective's send and receive buffers must not overlap.
    ops::copy(device_, params_.values().f32() + mine.offset, staging_.f32(), mine.count);
    data_->all_gather(staging_.f32(), params_.values().f32(), mine.count);
  }
  params_.refresh_gemm_weights();
}

}  // namespace mh
