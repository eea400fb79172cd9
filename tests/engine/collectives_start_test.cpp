// The engine's non-blocking collectives: reductions through a 1.1
// communicator's start/wait and the all-gather through a 1.4 one's, and the
// same calls on an older communicator, whose table has no such start, run
// blocking at once.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "../support/engine_env.hpp"
#include "engine/collectives.hpp"
#include "engine/device.hpp"

namespace mh {
namespace {

constexpr int32_t kRanks = 2;

// Runs body(rank, world) on every rank of a threads communicator whose table
// is `api` with its struct_size set to `table_size`.
template <class Body>
void on_ranks(size_t table_size, Body body) {
  test::EngineEnv env("[comm]\nworld_size = " + std::to_string(kRanks) + "\n");
  Instance comm(env.slot(MH_KIND_COMM), kRanks, -1);
  MH_CommApi api = *comm.api<MH_CommApi>();
  api.struct_size = table_size;
  std::vector<std::thread> ranks;
  for (int32_t r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      MH_Group* g = nullptr;
      check(api.world(comm.get(), r, &g));
      Collectives world(&api, g, "world", false);
      body(r, world);
    });
  for (std::thread& t : ranks) t.join();
}

TEST(CollectivesStart, ReductionsCompleteAtWait) {
  on_ranks(sizeof(MH_CommApi), [](int32_t rank, Collectives& world) {
    std::vector<float> sum(6, float(rank + 1)), send(2 * kRanks, float(rank + 1)), slice(2);
    PendingCollective a = world.all_reduce_start(sum.data(), 6);
    PendingCollective b = world.reduce_scatter_start(send.data(), slice.data(), 2);
    b.wait();
    a.wait();
    EXPECT_EQ(sum[5], 3.0f);
    EXPECT_EQ(slice[1], 3.0f);
  });
}

TEST(CollectivesStart, On1_0CommunicatorTheStartRunsBlocking) {
  on_ranks(MH_STRUCT_SIZE(MH_CommApi, abort), [](int32_t rank, Collectives& world) {
    std::vector<float> sum(6, float(rank + 1)), send(2 * kRanks, float(rank + 1)), slice(2);
    PendingCollective a = world.all_reduce_start(sum.data(), 6);
    EXPECT_EQ(sum[5], 3.0f) << "complete before any wait";
    PendingCollective b = world.reduce_scatter_start(send.data(), slice.data(), 2);
    EXPECT_EQ(slice[1], 3.0f) << "complete before any wait";
    a.wait();
    b.wait();
  });
}

// In place, as the distributed optimizer gathers its pieces.
TEST(CollectivesStart, AllGatherCompletesAtWait) {
  on_ranks(sizeof(MH_CommApi), [](int32_t rank, Collectives& world) {
    std::vector<float> all(2 * kRanks, -1.0f);
    all[size_t(2 * rank)] = all[size_t(2 * rank + 1)] = float(rank + 1);
    PendingCollective g = world.all_gather_start(all.data() + 2 * rank, all.data(), 2);
    g.wait();
    EXPECT_EQ(all, (std::vector<float>{1, 1, 2, 2}));
  });
}

TEST(CollectivesStart, On1_3CommunicatorTheGatherStartRunsBlocking) {
  on_ranks(MH_STRUCT_SIZE(MH_CommApi, request_destroy), [](int32_t rank, Collectives& world) {
    std::vector<float> all(2 * kRanks, -1.0f);
    all[size_t(2 * rank)] = all[size_t(2 * rank + 1)] = float(rank + 1);
    PendingCollective g = world.all_gather_start(all.data() + 2 * rank, all.data(), 2);
    EXPECT_EQ(all, (std::vector<float>{1, 1, 2, 2})) << "complete before any wait";
    g.wait();
  });
}

}  // namespace
}  // namespace mh
