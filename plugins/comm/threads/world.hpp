// What every group of one threads communicator shares: the timeout, the
// first rank failure (which aborts every group for good) and the live groups
// to wake when it happens.
#pragma once

#include "timeout.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mh::comm::threads {

class GroupState;

class World {
 public:
  explicit World(Clock::duration timeout) : timeout_(timeout) {}

  Clock::duration timeout() const { return timeout_; }

  // "rank R failed: reason" once a rank failed, NULL before. Lock-free so
  // waiters can test it in their wait predicates.
  const std::string* failure() const noexcept { return failure_.load(std::memory_order_acquire); }

  // Records the first failure and wakes every waiter of every live group.
  void fail(int32_t rank, const char* reason) noexcept;

  void track(const std::shared_ptr<GroupState>& group);

 private:
  std::vector<std::shared_ptr<GroupState>> live_groups();

  const Clock::duration timeout_;
  std::mutex mu_;
  std::string failure_text_;
  std::atomic<const std::string*> failure_{nullptr};
  std::vector<std::weak_ptr<GroupState>> groups_;
};

}  // namespace mh::comm::threads
