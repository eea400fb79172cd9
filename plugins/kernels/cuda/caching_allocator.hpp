// Device memory of one kernels instance, cached. A freed block goes to the
// free list of its size class and serves the next request of that class, so
// the buffers the engine allocates and frees every micro-batch cost no
// cudaMalloc or cudaFree (which synchronise the device) after the first step.
// Everything that uses a block runs on the instance's one stream in call
// order, so a block can be handed out again as soon as it is freed.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace mh::kernels {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`, 256-byte aligned. When the device is full
  // the cache is returned to it and the request retried once; then
  // MH_RESOURCE_EXHAUSTED. The calling thread's device must be `device`.
  void* allocate(uint64_t bytes);
  // Back to the cache; NULL and foreign pointers are ignored.
  void release(void* ptr) noexcept;
  // Returns every cached block to the device (cudaFree, which synchronises).
  void trim() noexcept;

  // The most bytes taken from the device at once (blocks in use and cached).
  uint64_t peak_reserved() const { return peak_; }
  int device() const { return device_; }

 private:
  void* fresh(uint64_t size, uint64_t requested);

  int device_;
  std::unordered_map<void*, uint64_t> sizes_;                 // every block, in use or cached
  std::unordered_map<uint64_t, std::vector<void*>> cached_;  // free blocks by size class
  uint64_t reserved_ = 0, peak_ = 0;
};

}  // namespace mh::kernels
