// The cpu component's block cache (plugins/kernels/cpu/block_cache.hpp).
#include "block_cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>

namespace mh::kernels::test {
namespace {

using cpu::BlockCache;

constexpr uint64_t kBig = BlockCache::kMinCachedBytes * 4;

TEST(BlockCache, AnotherSizeDoesNotGetTheCachedBlock) {
  BlockCache cache;
  void* a = cache.alloc(kBig);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, kBig);
  cache.free(a);
  EXPECT_EQ(cache.cached_bytes(), kBig);
  void* c = cache.alloc(kBig + 256);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c, a);
  EXPECT_EQ(cache.cached_bytes(), kBig);
  cache.free(c);
}

TEST(BlockCache, SameSizeGetsTheCachedBlockBack) {
  BlockCache cache;
  void* a = cache.alloc(kBig);
  ASSERT_NE(a, nullptr);
  cache.free(a);
  void* b = cache.alloc(kBig);
  EXPECT_EQ(b, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  cache.free(b);
}

TEST(BlockCache, LiveBlocksAreDistinctAlignedAndWritable) {
  BlockCache cache;
  std::set<void*> live;
  for (uint64_t bytes : {uint64_t{256}, uint64_t{4096}, kBig, kBig, BlockCache::kHugePageBytes,
                         BlockCache::kHugePageBytes + 256, 3 * BlockCache::kHugePageBytes}) {
    void* p = cache.alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    if (bytes >= BlockCache::kHugePageBytes) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % BlockCache::kHugePageBytes, 0u) << bytes;
    }
    EXPECT_TRUE(live.insert(p).second) << bytes;
    std::memset(p, 0x5a, bytes);
  }
  for (void* p : live) cache.free(p);
  cache.free(nullptr);
}

TEST(BlockCache, KeepsNoMoreThanThePeakOfLiveBytes) {
  BlockCache cache;
  void* a = cache.alloc(kBig);
  ASSERT_NE(a, nullptr);
  cache.free(a);  // peak kBig, cached kBig
  void* b = cache.alloc(2 * kBig);  // a stays cached; peak 2 kBig
  ASSERT_NE(b, nullptr);
  cache.free(b);  // kBig + 2 kBig > peak: b goes back to the system
  EXPECT_EQ(cache.cached_bytes(), kBig);
}

TEST(BlockCache, SmallBlocksAreNotKept) {
  BlockCache cache;
  void* a = cache.alloc(BlockCache::kMinCachedBytes - 256);
  ASSERT_NE(a, nullptr);
  cache.free(a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(BlockCache, AnImpossibleSizeFailsAfterReleasingTheCache) {
  BlockCache cache;
  void* a = cache.alloc(kBig);
  ASSERT_NE(a, nullptr);
  cache.free(a);
  EXPECT_EQ(cache.alloc(uint64_t{1} << 62), nullptr);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

}  // namespace
}  // namespace mh::kernels::test
