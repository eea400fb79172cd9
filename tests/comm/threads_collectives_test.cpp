// Every collective of the threads communicator against a reference computed
// on the test's own thread.
#include "threads_fixture.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace mh::comm::testing {
namespace {

class ThreadsCollectives : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsCollectives);

// Rank r's element i: distinct per rank and exactly representable in f32.
float value(int32_t rank, int64_t i) { return static_cast<float>(rank * 1000 + i % 997); }

std::vector<float> values_of(int32_t rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i);
  return v;
}

// A count that is no multiple of any tested group size and spans several tiles.
constexpr int64_t kCount = 10007;

TEST_P(ThreadsCollectives, AllReduceSumAddsEveryRanksBuffer) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    for (int64_t n : {int64_t{1}, int64_t{3}, kCount}) {
      std::vector<float> send = values_of(rank, n), recv(n, -1.0f);
      auto a = args<float>(send, recv);
      Status s(comm.api().all_reduce(world, &a));
      ASSERT_TRUE(s.ok()) << s.message;
      for (int64_t i = 0; i < n; ++i) {
        float expected = 0;
        for (int32_t r = 0; r < size(); ++r) expected += value(r, i);
        ASSERT_EQ(recv[i], expected) << "rank " << rank << " n " << n << " element " << i;
      }
    }
  });
}

TEST_P(ThreadsCollectives, AllReduceMaxTakesTheLargest) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send(kCount), recv(kCount);
    for (int64_t i = 0; i < kCount; ++i) send[i] = static_cast<float>((i + rank) % size()) - 0.5f;
    auto a = args<float>(send, recv, MH_REDUCE_MAX);
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[i], static_cast<float>(size() - 1) - 0.5f);
  });
}

TEST_P(ThreadsCollectives, AllReduceMaxPropagatesNaN) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send{rank == size() - 1 ? NAN : 1.0f}, recv(1);
    auto a = args<float>(send, recv, MH_REDUCE_MAX);
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    EXPECT_TRUE(std::isnan(recv[0]));
  });
}

TEST_P(ThreadsCollectives, AllReduceInPlace) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> buffer = values_of(rank, kCount);
    auto a = args<float>(buffer, buffer);
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    for (int64_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int32_t r = 0; r < size(); ++r) expected += value(r, i);
      ASSERT_EQ(buffer[i], expected);
    }
  });
}

// In place, as the distributed optimizer runs them (ABI 1.3).
TEST_P(ThreadsCollectives, ReduceScatterAndAllGatherInPlace) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> buffer = values_of(rank, kCount * size());
    std::span<float> all(buffer), mine = all.subspan(rank * kCount, kCount);
    auto scatter = args<float>(std::span<const float>(all), mine);
    ASSERT_TRUE(Status(comm.api().reduce_scatter(world, &scatter)).ok());
    auto gather = args<float>(std::span<const float>(mine), all);
    ASSERT_TRUE(Status(comm.api().all_gather(world, &gather)).ok());
    for (int64_t i = 0; i < kCount * size(); ++i) {
      float expected = 0;
      for (int32_t r = 0; r < size(); ++r) expected += value(r, i);
      ASSERT_EQ(buffer[i], expected) << "element " << i;
    }
  });
}

TEST_P(ThreadsCollectives, AllReduceSumsIntegers) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<int32_t> send32{rank, -rank, 1}, recv32(3);
    std::vector<int64_t> send64{int64_t{1} << 40, rank}, recv64(2);
    auto a32 = args<int32_t>(send32, recv32);
    auto a64 = args<int64_t>(send64, recv64);
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a32)).ok());
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a64)).ok());
    const int32_t ranks = size() * (size() - 1) / 2;
    EXPECT_EQ(recv32, (std::vector<int32_t>{ranks, -ranks, size()}));
    EXPECT_EQ(recv64, (std::vector<int64_t>{(int64_t{1} << 40) * size(), ranks}));
  });
}

// Magnitudes spread over 12 decades make f32 addition order-sensitive, so
// only the rank-order sum r0 + r1 + ... matches bit for bit.
TEST_P(ThreadsCollectives, AllReduceIsBitIdenticalToTheRankOrderSumOnEveryRank) {
  std::vector<std::vector<float>> inputs(size(), std::vector<float>(kCount));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> mantissa(-1, 1), exponent(-6, 6);
  for (auto& input : inputs)
    for (float& x : input) x = mantissa(rng) * std::pow(10.0f, exponent(rng));
  std::vector<float> expected(inputs[0]);
  for (int32_t r = 1; r < size(); ++r)
    for (int64_t i = 0; i < kCount; ++i) expected[i] += inputs[r][i];

  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> recv(kCount);
    auto a = args<float>(inputs[rank], recv);
    ASSERT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    EXPECT_EQ(std::memcmp(recv.data(), expected.data(), kCount * sizeof(float)), 0) << "rank " << rank;
  });
}

TEST_P(ThreadsCollectives, AllGatherConcatenatesInRankOrder) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send = values_of(rank, kCount), recv(kCount * size());
    auto a = args<float>(send, recv);
    ASSERT_TRUE(Status(comm.api().all_gather(world, &a)).ok());
    for (int32_t r = 0; r < size(); ++r)
      for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[r * kCount + i], value(r, i));
  });
}

TEST_P(ThreadsCollectives, AllGatherMovesAnyDtypeByElementSize) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<uint16_t> send{static_cast<uint16_t>(0x3f80 + rank), 0xffff}, recv(2 * size());
    auto a = args<uint16_t>(send, recv);
    ASSERT_TRUE(Status(comm.api().all_gather(world, &a)).ok());
    for (int32_t r = 0; r < size(); ++r) {
      EXPECT_EQ(recv[2 * r], 0x3f80 + r);
      EXPECT_EQ(recv[2 * r + 1], 0xffff);
    }
  });
}

TEST_P(ThreadsCollectives, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send = values_of(rank, kCount * size()), recv(kCount);
    auto a = args<float>(send, recv);
    ASSERT_TRUE(Status(comm.api().reduce_scatter(world, &a)).ok());
    for (int64_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int32_t r = 0; r < size(); ++r) expected += value(r, rank * kCount + i);
      ASSERT_EQ(recv[i], expected);
    }
  });
}

TEST_P(ThreadsCollectives, BroadcastCopiesTheRootsBufferToEveryRank) {
  Comm comm = make();
  const int32_t root = size() - 1;
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send = values_of(rank, kCount), recv(kCount);
    auto a = args<float>(send, recv, MH_REDUCE_SUM, root);
    ASSERT_TRUE(Status(comm.api().broadcast(world, &a)).ok());
    EXPECT_EQ(recv, values_of(root, kCount));
  });
}

TEST_P(ThreadsCollectives, BarrierReleasesNoRankBeforeAllArrived) {
  Comm comm = make();
  std::atomic<int32_t> arrived{0};
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    ++arrived;
    ASSERT_TRUE(Status(comm.api().barrier(world)).ok());
    EXPECT_EQ(arrived.load(), size());
  });
}

TEST_P(ThreadsCollectives, EmptyBuffersAreAllowed) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    auto a = args<float>({}, {});
    EXPECT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    EXPECT_TRUE(Status(comm.api().all_gather(world, &a)).ok());
  });
}

// abi.h: a buffer whose MH_Tensor says it lives elsewhere is refused before
// anything moves, on every rank, naming the call, the buffer and both
// devices; an empty one (data NULL) holds nothing and is not checked.
TEST_P(ThreadsCollectives, RefusesABufferOnAnotherDevice) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send = values_of(rank, 3), recv(3, -1.0f);
    auto a = args<float>(send, recv);
    a.recv.device = MH_DEVICE_CUDA;
    Status s(comm.api().all_reduce(world, &a));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "all_reduce on group world")) << s.message;
    EXPECT_TRUE(contains(s.message, "recv is on cuda:0, but this communicator works on cpu")) << s.message;
    EXPECT_EQ(recv, std::vector<float>(3, -1.0f));
    auto empty = args<float>({}, {});
    empty.send.device = empty.recv.device = MH_DEVICE_CUDA;
    EXPECT_TRUE(Status(comm.api().all_reduce(world, &empty)).ok());
  });
}

TEST_P(ThreadsCollectives, ManyCollectivesInARowStayInStep) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    for (int32_t step = 0; step < 200; ++step) {
      std::vector<float> send{static_cast<float>(rank + step)}, sum(1), all(size());
      auto reduce = args<float>(send, sum);
      auto gather = args<float>(send, all);
      ASSERT_TRUE(Status(comm.api().all_reduce(world, &reduce)).ok());
      ASSERT_TRUE(Status(comm.api().all_gather(world, &gather)).ok());
      ASSERT_EQ(sum[0], static_cast<float>(size() * (size() - 1) / 2 + size() * step));
      for (int32_t r = 0; r < size(); ++r) ASSERT_EQ(all[r], static_cast<float>(r + step));
    }
  });
}

TEST_P(ThreadsCollectives, InfoHostsEveryRankInThisProcess) {
  Comm comm = make();
  const MH_CommInfo info = comm.info();
  EXPECT_EQ(info.world_size, size());
  EXPECT_EQ(info.ranks_in_process, size());
  EXPECT_EQ(info.first_rank, 0);
  MH_Group* group = nullptr;
  EXPECT_EQ(Status(comm.api().world(comm.self(), size(), &group)).code, MH_INVALID_ARGUMENT);
  EXPECT_EQ(comm.api().group_rank(comm.world(size() - 1)), size() - 1);
  EXPECT_EQ(comm.api().group_size(comm.world(0)), size());
}

}  // namespace
}  // namespace mh::comm::testing
