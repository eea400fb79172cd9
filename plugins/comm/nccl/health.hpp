// The first rank failure reported through abort(), shared by every group of
// an instance: waiting ranks see it within one poll and stop with ABORTED.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mh::comm::nccl {

class Health {
 public:
  // Keeps the first failure only. Lock-free: it never blocks.
  void fail(int32_t rank, const char* reason) noexcept {
    int expected = kHealthy;
    if (!state_.compare_exchange_strong(expected, kWriting)) return;
    try {
      reason_ = "rank " + std::to_string(rank) + " failed: " + (reason != nullptr ? reason : "no reason given");
    } catch (...) {
      reason_.clear();  // no memory for the text; the failure still counts
    }
    state_.store(kFailed, std::memory_order_release);
  }

  bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }
  // "rank R failed: reason", once failed() is true.
  const std::string& reason() const { return reason_; }

 private:
  static constexpr int kHealthy = 0, kWriting = 1, kFailed = 2;
  std::atomic<int> state_{kHealthy};
  std::string reason_;
};

}  // namespace mh::comm::nccl
