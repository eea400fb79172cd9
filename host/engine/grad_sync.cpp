#include "engine/grad_sync.hpp"

#include <algorithm>
#include <utility>

namespace mh {

std::vector<GroupRange> reduction_ranges(const std::vector<GradBucket>& buckets) {
  std::vector<GroupRange> ranges;
  for (const GradBucket& b : buckets) ranges.insert(ranges.end(), b.ranges.begin(), b.ranges.end());
  return ranges;
}

GradSync::GradSync(ParamSet& params, Optimizer& optimizer, std::vector<GradBucket> buckets, GradSyncGroups groups)
    : params_(params),
      optimizer_(optimizer),
      buckets_(std::move(buckets)),
      groups_(groups),
      bucket_of_(params.infos().size()),
      uses_(params.infos().size(), 1) {
  size_t range = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    first_range_.push_back(range);
    range += buckets_[b].ranges.size();
    for (int id : buckets_[b].params) bucket_of_[size_t(id)] = b;
  }
  // A stage holding both ends of the model finalises the tied embedding
  // twice: in the output layer's backward and the embedding's.
  if (params.wte() >= 0) uses_[size_t(params.wte())] = params.wte_uses();
  stats_.buckets = int32_t(buckets_.size());
  reset();
}

void GradSync::reset() {
  uses_left_ = uses_;
  params_left_.clear();
  for (const GradBucket& b : buckets_) params_left_.push_back(int32_t(b.params.size()));
  started_.assign(buckets_.size(), false);
}

void GradSync::finalised(std::span<const int> ids) {
  for (int id : ids) {
    if (!params_.trainable(id) || --uses_left_[size_t(id)] > 0) continue;
    const size_t b = bucket_of_[size_t(id)];
    const bool shared = buckets_[b].tied_embedding && groups_.embedding != nullptr;
    if (--params_left_[b] == 0 && !shared) start(b);
  }
}

void GradSync::start(size_t bucket) {
  const GradBucket& b = buckets_[bucket];
  if (std::find(started_.begin(), started_.end(), true) == started_.end()) first_start_ = Clock::now();
  started_[bucket] = true;
  float* grads = params_.grads().f32();
  if (groups_.tensor != nullptr)  // replicated parameters saw only this rank's sequence shard
    for (const GroupRange& r : b.replicated) groups_.tensor->all_reduce(grads + r.offset, r.count);
  if (groups_.heads != nullptr)  // each rank normalised its own heads
    for (const GroupRange& r : b.per_head) groups_.heads->all_reduce(grads + r.offset, r.count);
  if (b.tied_embedding && groups_.embedding != nullptr)  // its two uses, on the first and last stage
    groups_.embedding->all_reduce(params_.grad(params_.wte()), params_.info(params_.wte()).numel());
  for (size_t i = 0; i < b.ranges.size(); ++i) {
    Collectives* group = params_.experts(b.ranges[i]) ? groups_.expert_data : groups_.data;
    if (group == nullptr) continue;
    pending_.push_back(optimizer_.distributed()
                           ? optimizer_.reduce_scatter_start(first_range_[bucket] + i)
                           : group->all_reduce_start(grads + b.ranges[i].offset, b.ranges[i].count));
  }
}

void GradSync::finish() {
  const auto backward_end = Clock::now();
  int32_t early = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (started_[b]) ++early;
    else start(b);
  }
  for (PendingCollective& p : pending_) p.wait();
  pending_.clear();
  stats_.started_in_backward = early;
  stats_.overlap_s = early > 0 ? std::chrono::duration<double>(backward_end - first_start_).count() : 0.0;
  stats_.wait_s = std::chrono::duration<double>(Clock::now() - backward_end).count();
  reset();
}

}  // namespace mh
