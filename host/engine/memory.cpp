#include "engine/memory.hpp"

#include <algorithm>
#include <cstdio>

namespace mh {

std::string memory_text(uint64_t bytes) {
  const bool gib = bytes >= (uint64_t{1} << 30);
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", double(bytes) / double(uint64_t{1} << (gib ? 30 : 20)),
                gib ? "GiB" : "MiB");
  return text;
}

const char* category_name(MemCategory c) {
  static const char* const kNames[] = {"params", "grads", "optimizer", "activations", "workspace", "comm", "checkpoint", "kv_cache"};
  return kNames[static_cast<size_t>(c)];
}

void MemoryTracker::on_alloc(MemCategory c, uint64_t bytes) {
  current_[idx(c)] += bytes;
  peak_[idx(c)] = std::max(peak_[idx(c)], current_[idx(c)]);
  total_current_ += bytes;
  total_peak_ = std::max(total_peak_, total_current_);
}

void MemoryTracker::on_free(MemCategory c, uint64_t bytes) {
  current_[idx(c)] -= bytes;
  total_current_ -= bytes;
}

void MemoryTracker::reset_peaks() {
  peak_ = current_;
  total_peak_ = total_current_;
}

}  // namespace mh
