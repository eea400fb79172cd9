#include "world.hpp"

#include "group_state.hpp"

namespace mh::comm::threads {

// Allocation is all that can throw here, and noexcept turns it into
// std::terminate: better than a failure its peers never hear of.
void World::fail(int32_t rank, const char* reason) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.load(std::memory_order_relaxed) != nullptr) return;
    failure_text_ = "rank " + std::to_string(rank) + " failed: " + (reason != nullptr ? reason : "no reason given");
    failure_.store(&failure_text_, std::memory_order_release);
  }
  // Woken outside mu_: split holds a group's lock while it calls track().
  for (const auto& group : live_groups()) group->wake();
}

void World::track(const std::shared_ptr<GroupState>& group) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(groups_, [](const std::weak_ptr<GroupState>& g) { return g.expired(); });
  groups_.push_back(group);
}

std::vector<std::shared_ptr<GroupState>> World::live_groups() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<GroupState>> live;
  for (const auto& g : groups_)
    if (auto group = g.lock()) live.push_back(std::move(group));
  return live;
}

}  // namespace mh::comm::threads
