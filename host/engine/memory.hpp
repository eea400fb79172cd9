// Exact memory accounting: every device allocation of the engine goes
// through one tracker, tagged with a category, and the peak of each
// category (and of their sum) is kept per rank.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace mh {

// kCheckpoint is the host staging copy of an asynchronous checkpoint save:
// on the CPU the same memory as the rest; on a GPU host memory, counted
// here so that a dry run bounds it too. kKvCache holds generation's keys
// and values of every sequence served.
enum class MemCategory {
  kParams, kGrads, kOptimizer, kActivations, kWorkspace, kComm, kCheckpoint, kKvCache, kCount
};
constexpr size_t kMemCategories = static_cast<size_t>(MemCategory::kCount);

const char* category_name(MemCategory c);
// "1.45 MiB", "26.00 GiB": a size for messages.
std::string memory_text(uint64_t bytes);

class MemoryTracker {
 public:
  void on_alloc(MemCategory c, uint64_t bytes);
  void on_free(MemCategory c, uint64_t bytes);

  uint64_t current(MemCategory c) const { return current_[idx(c)]; }
  uint64_t peak(MemCategory c) const { return peak_[idx(c)]; }
  uint64_t total_peak() const { return total_peak_; }
  uint64_t total_current() const { return total_current_; }
  // Restarts the peaks from the current usage, e.g. to measure one step.
  void reset_peaks();

 private:
  static size_t idx(MemCategory c) { return static_cast<size_t>(c); }
  std::array<uint64_t, kMemCategories> current_{};
  std::array<uint64_t, kMemCategories> peak_{};
  uint64_t total_current_ = 0;
  uint64_t total_peak_ = 0;
};

}  // namespace mh
