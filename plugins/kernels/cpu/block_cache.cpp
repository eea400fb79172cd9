#include "block_cache.hpp"

#include "alloc_size.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace mh::kernels::cpu {
namespace {

void* fresh(uint64_t bytes) {
  if (bytes < BlockCache::kHugePageBytes) return std::aligned_alloc(kAllocAlignment, bytes);
  if (bytes > UINT64_MAX - BlockCache::kHugePageBytes) return nullptr;
  const uint64_t whole = (bytes + BlockCache::kHugePageBytes - 1) / BlockCache::kHugePageBytes *
                         BlockCache::kHugePageBytes;
  void* ptr = std::aligned_alloc(BlockCache::kHugePageBytes, whole);
  if (ptr != nullptr) madvise(ptr, whole, MADV_HUGEPAGE);  // advice only: a failure changes nothing
  return ptr;
}

}  // namespace

BlockCache::~BlockCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
  // Blocks still live belong to a caller that never freed them; leave them.
}

void* BlockCache::alloc(uint64_t bytes) {
  if (bytes < kMinCachedBytes) return std::aligned_alloc(kAllocAlignment, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  if (auto it = cached_.find(bytes); it != cached_.end()) {
    ptr = it->second;
    cached_.erase(it);
    cached_bytes_ -= bytes;
  } else {
    ptr = fresh(bytes);
    if (ptr == nullptr && cached_bytes_ > 0) {
      release_cached_locked();
      ptr = fresh(bytes);
    }
    if (ptr == nullptr) return nullptr;
  }
  try {
    live_.emplace(ptr, bytes);
  } catch (const std::bad_alloc&) {
    std::free(ptr);
    return nullptr;
  }
  live_bytes_ += bytes;
  if (live_bytes_ > peak_live_bytes_) peak_live_bytes_ = live_bytes_;
  return ptr;
}

void BlockCache::free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end()) {  // a block under kMinCachedBytes
    std::free(ptr);
    return;
  }
  const uint64_t bytes = it->second;
  live_.erase(it);
  live_bytes_ -= bytes;
  if (cached_bytes_ + bytes <= peak_live_bytes_) {
    try {
      cached_.emplace(bytes, ptr);
      cached_bytes_ += bytes;
      return;
    } catch (const std::bad_alloc&) {
    }
  }
  std::free(ptr);
}

uint64_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

void BlockCache::release_cached_locked() noexcept {
  for (const auto& [bytes, ptr] : cached_) std::free(ptr);
  cached_.clear();
  cached_bytes_ = 0;
}

}  // namespace mh::kernels::cpu
