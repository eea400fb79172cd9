#include "engine/param_gather.hpp"

#include <megahost/error.hpp>

#include <utility>

namespace mh {

ParamGather::ParamGather(Optimizer& optimizer, const std::vector<GradBucket>& buckets, size_t num_params, bool overlap)
    : optimizer_(optimizer), bucket_of_(num_params), pending_(buckets.size()), overlap_(overlap) {
  require(!overlap || optimizer.distributed(), "overlapping the parameter gather needs the distributed optimizer");
  size_t range = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    first_range_.push_back(range);
    num_ranges_.push_back(buckets[b].ranges.size());
    range += buckets[b].ranges.size();
    for (int id : buckets[b].params) bucket_of_[size_t(id)] = b;
  }
}

void ParamGather::publish() {
  wait_all();
  if (!overlap_) {
    const auto start = Clock::now();
    optimizer_.publish();
    wait_s_ += std::chrono::duration<double>(Clock::now() - start).count();
    return;
  }
  optimizer_.round_master();
  for (size_t b = pending_.size(); b-- > 0;)
    for (size_t r = first_range_[b]; r < first_range_[b] + num_ranges_[b]; ++r)
      pending_[b].push_back(optimizer_.all_gather_start(r));
}

void ParamGather::wait(size_t bucket) {
  if (pending_[bucket].empty()) return;
  const auto start = Clock::now();
  for (PendingCollective& p : pending_[bucket]) p.wait();
  pending_[bucket].clear();
  wait_s_ += std::chrono::duration<double>(Clock::now() - start).count();
}

void ParamGather::needed(std::span<const int> ids) {
  for (int id : ids)
    if (optimizer_.trains(id)) wait(bucket_of_.at(size_t(id)));
}

void ParamGather::wait_all() {
  for (size_t b = pending_.size(); b-- > 0;) wait(b);
}

double ParamGather::take_wait_s() { return std::exchange(wait_s_, 0.0); }

}  // namespace mh
