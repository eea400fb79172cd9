// The size every kernels component reserves for an alloc, so that a dry run
// accounts exactly the blocks a real one takes.
#pragma once

#include <megahost/error.hpp>

#include <cstdint>
#include <string>

namespace mh::kernels {

inline constexpr uint64_t kAllocAlignment = 256;

// `bytes` rounded up to whole 256-byte blocks; 0 bytes still takes one block,
// so that every allocation has an address of its own.
inline uint64_t alloc_size(uint64_t bytes) {
  require(bytes <= UINT64_MAX - kAllocAlignment,
          "alloc: " + std::to_string(bytes) + " bytes is beyond any device", MH_RESOURCE_EXHAUSTED);
  return bytes == 0 ? kAllocAlignment : (bytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}

}  // namespace mh::kernels
