// Host memory behind the cpu component's alloc and free.
//
// The engine allocates the same sizes in the same order every training step
// (activations, workspaces, the logits), and frees them again. Through plain
// malloc/free, blocks above glibc's mmap threshold (32 MiB at most, e.g. the
// [tokens, vocab] logits) come back as fresh pages each step, and heap memory
// returned by trimming is faulted in again: GPT-2 small took ~290k page faults
// (1.1 GB) per step, each several microseconds on a virtual machine. So freed
// blocks of at least kMinCachedBytes are kept and handed out again for a later
// request of the same size, like a GPU caching allocator. What is kept is
// bounded by the peak of live cached-size bytes seen so far, so the memory
// held is at most twice the peak in use; a failed allocation first releases
// everything kept and tries again.
//
// Blocks of at least 2 MiB start on a 2 MiB boundary and are advised as
// transparent huge pages (MADV_HUGEPAGE; the kernel may ignore it): fewer
// faults on first touch and fewer TLB misses in the GEMMs' packing.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace mh::kernels::cpu {

class BlockCache {
 public:
  static constexpr uint64_t kMinCachedBytes = uint64_t{64} << 10;
  static constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

  BlockCache() = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache();

  // `bytes` is a whole number of 256-byte blocks (alloc_size); the result is
  // 256-byte aligned, or nullptr when the system has no memory for it.
  void* alloc(uint64_t bytes);
  void free(void* ptr) noexcept;

  uint64_t cached_bytes() const;

 private:
  void release_cached_locked() noexcept;

  mutable std::mutex mutex_;
  std::unordered_multimap<uint64_t, void*> cached_;  // free blocks by size
  std::unordered_map<void*, uint64_t> live_;          // blocks in use of >= kMinCachedBytes
  uint64_t cached_bytes_ = 0, live_bytes_ = 0, peak_live_bytes_ = 0;
};

}  // namespace mh::kernels::cpu
