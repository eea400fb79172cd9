#include "caching_allocator.hpp"

#include "alloc_size.hpp"

#include <megahost/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <string>

namespace mh::kernels {
namespace {

// Requests up to 1 MiB get a class per 256-byte size; larger ones one of
// eight classes per power of two, so a block wastes at most 1/8 of itself
// while slightly different sizes (the engine's shapes) share free lists.
constexpr uint64_t kExactClasses = uint64_t{1} << 20;

uint64_t size_class(uint64_t bytes) {
  const uint64_t size = alloc_size(bytes);
  if (size <= kExactClasses) return size;
  const uint64_t step = std::bit_floor(size) / 8;
  return (size + step - 1) / step * step;
}

}  // namespace

CachingAllocator::~CachingAllocator() {
  for (const auto& [ptr, size] : sizes_) cudaFree(ptr);
}

void* CachingAllocator::allocate(uint64_t bytes) {
  const uint64_t size = size_class(bytes);
  auto it = cached_.find(size);
  if (it == cached_.end() || it->second.empty()) return fresh(size, bytes);
  void* ptr = it->second.back();
  it->second.pop_back();
  return ptr;
}

void* CachingAllocator::fresh(uint64_t size, uint64_t requested) {
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, size) != cudaSuccess) {
    // A failed allocation is not a sticky error; clear it so that the next
    // launch check does not report it.
    cudaGetLastError();
    trim();
    if (cudaMalloc(&ptr, size) != cudaSuccess) {
      cudaGetLastError();
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw Error(MH_RESOURCE_EXHAUSTED, "alloc: cannot allocate " + std::to_string(requested) +
                                             " bytes on CUDA device " + std::to_string(device_) + ": " +
                                             std::to_string(free) + " of " + std::to_string(total) +
                                             " bytes free, " + std::to_string(reserved_) + " held by this instance");
    }
  }
  sizes_.emplace(ptr, size);
  reserved_ += size;
  peak_ = std::max(peak_, reserved_);
  return ptr;
}

void CachingAllocator::release(void* ptr) noexcept {
  const auto it = sizes_.find(ptr);
  if (it == sizes_.end()) return;
  try {
    cached_[it->second].push_back(ptr);
  } catch (...) {
    // No host memory for the free list: give the block back instead.
    cudaFree(ptr);
    reserved_ -= it->second;
    sizes_.erase(it);
  }
}

void CachingAllocator::trim() noexcept {
  for (auto& [size, blocks] : cached_) {
    for (void* ptr : blocks) {
      cudaFree(ptr);
      sizes_.erase(ptr);
      reserved_ -= size;
    }
  }
  cached_.clear();
}

}  // namespace mh::kernels
