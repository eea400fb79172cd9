#include "engine/optimizer.hpp"

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

Optimizer::Optimizer(Device& device, ParamSet& params, const AdamWConfig& config)
    : device_(device), params_(params), config_(config) {
  m_ = Buffer(device, MemCategory::kOptimizer, params.numel());
  v_ = Buffer(device, MemCategory::kOptimizer, params.numel());
  ops::fill(device, m_.f32(), m_.numel(), 0);
  ops::fill(device, v_.f32(), v_.numel(), 0);
}

double Optimizer::grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups) {
  Buffer sum(device_, MemCategory::kWorkspace, 1);
  ops::fill(device_, sum.f32(), 1, 0);
  for (const GroupRange& r : ranges) {
    MH_SumSquaresArgs a{};
    a.x = view(params_.grads().f32() + r.offset, MH_F32, {r.count});
    a.out = sum.t({1});
    device_.run(&MH_KernelsApi::sum_squares, a, "sum_squares");
  }
  for (Collectives* g : groups)
    if (g->size() > 1) g->all_reduce(sum.f32(), 1);
  float host = 0;
  device_.to_host(&host, sum.data(), sizeof(float));
  return std::sqrt(double(host));
}

void Optimizer::step(int64_t step, double norm) {
  if (config_.clip_grad > 0 && norm > config_.clip_grad)
    ops::scale(device_, params_.grads().f32(), params_.numel(), float(config_.clip_grad / (norm + 1e-6)));
  const double lr = learning_rate(config_, step);
  for (size_t g = 0; g < kParamGroups; ++g) {
    auto group = static_cast<ParamGroup>(g);
    GroupRange r = params_.group(group);
    if (r.count == 0) continue;
    bool decay = group == ParamGroup::kShardedDecay || group == ParamGroup::kReplicatedDecay;
    MH_AdamWArgs a{};
    a.param = view(params_.values().f32() + r.offset, MH_F32, {r.count});
    a.grad = view(params_.grads().f32() + r.offset, MH_F32, {r.count});
    a.m = view(m_.f32() + r.offset, MH_F32, {r.count});
    a.v = view(v_.f32() + r.offset, MH_F32, {r.count});
    a.lr = float(lr);
    a.beta1 = float(config_.beta1);
    a.beta2 = float(config_.beta2);
    a.eps = float(config_.eps);
    a.weight_decay = decay ? float(config_.weight_decay) : 0.f;
    a.step = step;
    device_.run(&MH_KernelsApi::adamw, a, "adamw");
  }
}

}  // namespace mh
