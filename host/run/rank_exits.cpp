#include "run/rank_exits.hpp"

#include <algorithm>

namespace mh {

void RankExits::returned(int32_t local, bool failed) {
  {
    std::lock_guard lock(mu_);
    returned_[size_t(local)] = true;
    failed_ = failed_ || failed;
  }
  cv_.notify_all();
}

std::vector<int32_t> RankExits::wait(std::chrono::duration<double> grace, const std::function<bool()>& stalled) {
  std::unique_lock lock(mu_);
  const auto all_returned = [&] { return std::all_of(returned_.begin(), returned_.end(), [](bool r) { return r; }); };
  const auto poll = std::min<std::chrono::duration<double>>(grace / 4, std::chrono::seconds(1));
  bool stopped = false;
  while (!stopped && !cv_.wait_for(lock, poll, [&] { return failed_ || all_returned(); })) stopped = stalled();
  if (!stopped) cv_.wait_for(lock, grace, all_returned);
  std::vector<int32_t> running;
  for (size_t local = 0; local < returned_.size(); ++local)
    if (!returned_[local]) running.push_back(first_rank_ + int32_t(local));
  return running;
}

}  // namespace mh
