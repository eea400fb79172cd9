// The mpi communicator under mpiexec (-n 2 and -n 4): every rank runs every
// test in the same order, so each test is one collective program.
#include "comm_harness.hpp"
#include "mpi_comm.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace mh::comm::testing {
namespace {

// Short, so that a test whose peers never come fails fast.
constexpr double kTimeout = 1.0;

Comm* g_comm = nullptr;

class Mpi : public ::testing::Test {
 protected:
  const MH_CommApi& api() const { return g_comm->api(); }
  MH_Group* world() const { return g_comm->world(0); }
  int32_t rank() const { return api().group_rank(world()); }
  int32_t size() const { return api().group_size(world()); }
};

float value(int32_t rank, int64_t i) { return static_cast<float>(rank * 1000 + i % 997); }

std::vector<float> values_of(int32_t rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i);
  return v;
}

constexpr int64_t kCount = 10007;

TEST_F(Mpi, InfoHostsOneRankPerProcess) {
  const MH_CommInfo info = g_comm->info();
  EXPECT_EQ(info.ranks_in_process, 1);
  EXPECT_EQ(info.world_size, size());
  EXPECT_EQ(info.first_rank, rank());
  MH_Group* other = nullptr;
  EXPECT_EQ(Status(api().world(g_comm->self(), 1, &other)).code, MH_INVALID_ARGUMENT);
}

TEST_F(Mpi, AllReduceSumAndMax) {
  std::vector<float> send = values_of(rank(), kCount), sum(kCount), max(kCount);
  auto s = args<float>(send, sum);
  auto m = args<float>(send, max, MH_REDUCE_MAX);
  ASSERT_TRUE(Status(api().all_reduce(world(), &s)).ok());
  ASSERT_TRUE(Status(api().all_reduce(world(), &m)).ok());
  for (int64_t i = 0; i < kCount; ++i) {
    float expected = 0;
    for (int32_t r = 0; r < size(); ++r) expected += value(r, i);
    ASSERT_EQ(sum[i], expected);
    ASSERT_EQ(max[i], value(size() - 1, i));
  }
}

TEST_F(Mpi, AllReduceInPlaceAndOnIntegers) {
  std::vector<float> buffer{static_cast<float>(rank())};
  std::vector<int64_t> big{int64_t{1} << 40}, big_sum(1);
  auto f = args<float>(buffer, buffer);
  auto i = args<int64_t>(big, big_sum);
  ASSERT_TRUE(Status(api().all_reduce(world(), &f)).ok());
  ASSERT_TRUE(Status(api().all_reduce(world(), &i)).ok());
  EXPECT_EQ(buffer[0], static_cast<float>(size() * (size() - 1) / 2));
  EXPECT_EQ(big_sum[0], (int64_t{1} << 40) * size());
}

// The result's bytes are gathered and compared across ranks.
TEST_F(Mpi, AllReduceGivesTheSameBitsOnEveryRank) {
  std::mt19937 rng(1234 + rank());
  std::uniform_real_distribution<float> mantissa(-1, 1), exponent(-6, 6);
  std::vector<float> send(kCount), recv(kCount);
  for (float& x : send) x = mantissa(rng) * std::pow(10.0f, exponent(rng));
  auto a = args<float>(send, recv);
  ASSERT_TRUE(Status(api().all_reduce(world(), &a)).ok());
  std::vector<uint8_t> mine(kCount * sizeof(float)), all(mine.size() * size());
  std::memcpy(mine.data(), recv.data(), mine.size());
  auto g = args<uint8_t>(mine, all);
  ASSERT_TRUE(Status(api().all_gather(world(), &g)).ok());
  for (int32_t r = 0; r < size(); ++r)
    EXPECT_EQ(std::memcmp(all.data() + r * mine.size(), mine.data(), mine.size()), 0) << "rank " << r;
}

TEST_F(Mpi, AllGatherConcatenatesInRankOrder) {
  std::vector<float> send = values_of(rank(), kCount), recv(kCount * size());
  auto a = args<float>(send, recv);
  ASSERT_TRUE(Status(api().all_gather(world(), &a)).ok());
  for (int32_t r = 0; r < size(); ++r)
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[r * kCount + i], value(r, i));
}

TEST_F(Mpi, AllGatherMovesBf16ByElementSize) {
  std::vector<uint16_t> send{static_cast<uint16_t>(0x3f80 + rank())}, recv(size());
  auto a = args<uint16_t>(send, recv);
  ASSERT_TRUE(Status(api().all_gather(world(), &a)).ok());
  for (int32_t r = 0; r < size(); ++r) EXPECT_EQ(recv[r], 0x3f80 + r);
}

TEST_F(Mpi, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  std::vector<float> send = values_of(rank(), kCount * size()), recv(kCount);
  auto a = args<float>(send, recv);
  ASSERT_TRUE(Status(api().reduce_scatter(world(), &a)).ok());
  for (int64_t i = 0; i < kCount; ++i) {
    float expected = 0;
    for (int32_t r = 0; r < size(); ++r) expected += value(r, rank() * kCount + i);
    ASSERT_EQ(recv[i], expected);
  }
}

// In place, as the distributed optimizer runs them (ABI 1.3): recv is this
// rank's block of send, and the gather's send is its block of recv.
TEST_F(Mpi, ReduceScatterInPlaceLeavesTheSumInTheRanksBlock) {
  std::vector<float> buffer = values_of(rank(), kCount * size());
  auto a = args<float>(std::span<const float>(buffer), std::span<float>(buffer).subspan(rank() * kCount, kCount));
  ASSERT_TRUE(Status(api().reduce_scatter(world(), &a)).ok());
  for (int64_t i = 0; i < kCount; ++i) {
    float expected = 0;
    for (int32_t r = 0; r < size(); ++r) expected += value(r, rank() * kCount + i);
    ASSERT_EQ(buffer[rank() * kCount + i], expected);
  }
}

TEST_F(Mpi, AllGatherInPlaceFillsEveryOtherBlock) {
  std::vector<float> buffer(kCount * size(), -1.0f);
  for (int64_t i = 0; i < kCount; ++i) buffer[rank() * kCount + i] = value(rank(), i);
  auto a = args<float>(std::span<const float>(buffer).subspan(rank() * kCount, kCount), std::span<float>(buffer));
  ASSERT_TRUE(Status(api().all_gather(world(), &a)).ok());
  for (int32_t r = 0; r < size(); ++r)
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(buffer[r * kCount + i], value(r, i));
}

TEST_F(Mpi, BroadcastCopiesTheRootsBufferToEveryRank) {
  const int32_t root = size() - 1;
  std::vector<float> send = values_of(rank(), kCount), recv(kCount);
  auto a = args<float>(send, recv, MH_REDUCE_SUM, root);
  ASSERT_TRUE(Status(api().broadcast(world(), &a)).ok());
  EXPECT_EQ(recv, values_of(root, kCount));
}

TEST_F(Mpi, BarrierCompletes) { EXPECT_TRUE(Status(api().barrier(world())).ok()); }

TEST_F(Mpi, SplitIntoTensorAndDataGroups) {
  MH_Group* tp = nullptr;
  MH_Group* dp = nullptr;
  ASSERT_TRUE(Status(api().split(world(), rank() / 2, rank(), &tp)).ok());
  ASSERT_TRUE(Status(api().split(world(), rank() % 2, rank(), &dp)).ok());
  EXPECT_EQ(api().group_rank(tp), rank() % 2);
  EXPECT_EQ(api().group_rank(dp), rank() / 2);
  EXPECT_EQ(api().group_size(dp), size() / 2);
  std::vector<int32_t> me{rank()}, tp_members(api().group_size(tp)), dp_members(api().group_size(dp));
  auto t = args<int32_t>(me, tp_members);
  auto d = args<int32_t>(me, dp_members);
  ASSERT_TRUE(Status(api().all_gather(tp, &t)).ok());
  ASSERT_TRUE(Status(api().all_gather(dp, &d)).ok());
  EXPECT_EQ(tp_members, (std::vector<int32_t>{rank() / 2 * 2, rank() / 2 * 2 + 1}));
  for (int32_t i = 0; i < api().group_size(dp); ++i) EXPECT_EQ(dp_members[i], 2 * i + rank() % 2);
  api().group_destroy(tp);
  api().group_destroy(dp);
}

TEST_F(Mpi, SplitWithANegativeColorIsRefusedOnEveryRank) {
  MH_Group* group = nullptr;
  Status s(api().split(world(), rank() == 1 ? -1 : 0, 0, &group));
  EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "global rank 1 passed color -1")) << s.message;
}

TEST_F(Mpi, PingPongBetweenPairs) {
  const int32_t partner = rank() ^ 1;
  std::vector<float> ball(1000, 0.0f);
  for (int32_t hit = 0; hit < 20; ++hit) {
    if ((hit + rank()) % 2 == 0) {
      for (float& x : ball) x += 1;
      auto a = send_args<float>(ball, partner);
      ASSERT_TRUE(Status(api().send(world(), &a)).ok());
    } else {
      auto a = recv_args<float>(ball, partner);
      ASSERT_TRUE(Status(api().recv(world(), &a)).ok());
      ASSERT_EQ(ball[999], static_cast<float>(hit + 1));
    }
  }
}

// 4 MiB messages go by MPI's rendezvous protocol: a send that waited for
// its receiver would deadlock here.
TEST_F(Mpi, NeighboursSendingLargeMessagesToEachOtherDoNotDeadlock) {
  const int32_t right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  std::vector<float> mine(1 << 20, static_cast<float>(rank())), got(1 << 20);
  auto s = send_args<float>(mine, right);
  auto r = recv_args<float>(got, left);
  ASSERT_TRUE(Status(api().send(world(), &s)).ok());
  ASSERT_TRUE(Status(api().recv(world(), &r)).ok());
  EXPECT_EQ(got[777], static_cast<float>(left));
}

TEST_F(Mpi, RecvOfAnotherSizeIsInvalidArgument) {
  const int32_t partner = rank() ^ 1;
  for (int64_t expected : {3, 5}) {
    std::vector<float> mine(4), got(expected);
    auto s = send_args<float>(mine, partner);
    auto r = recv_args<float>(got, partner);
    ASSERT_TRUE(Status(api().send(world(), &s)).ok());
    EXPECT_EQ(Status(api().recv(world(), &r)).code, MH_INVALID_ARGUMENT) << "recv of " << expected;
  }
}

TEST_F(Mpi, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  std::vector<float> send(2), recv(2 * size() + 1);
  auto a = args<float>(send, recv);
  Status s(api().all_gather(world(), &a));
  EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "all_gather on group world")) << s.message;
  std::vector<uint16_t> half(2), half_out(2);
  auto h = args<uint16_t>(half, half_out);
  h.send.dtype = h.recv.dtype = MH_F16;
  EXPECT_EQ(Status(api().all_reduce(world(), &h)).code, MH_UNIMPLEMENTED);
  EXPECT_TRUE(Status(api().barrier(world())).ok());
}

TEST_F(Mpi, ABufferOnAnotherDeviceIsRefusedBeforeAnythingIsSent) {
  std::vector<float> send(2), recv(2);
  auto a = args<float>(send, recv);
  a.send.device = MH_DEVICE_CUDA;
  Status s(api().all_reduce(world(), &a));
  EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "all_reduce on group world")) << s.message;
  EXPECT_TRUE(contains(s.message, "send is on cuda:0, but this communicator works on cpu")) << s.message;
  EXPECT_TRUE(Status(api().barrier(world())).ok());
}

// The last rank comes to the barrier only after the others timed out; its
// late barrier then completes theirs, which MPI cannot cancel, before the
// group goes.
TEST_F(Mpi, ACollectiveTimesOutNamingItself) {
  ASSERT_TRUE(Status(api().barrier(world())).ok());
  MH_Group* group = nullptr;
  ASSERT_TRUE(Status(api().split(world(), 0, rank(), &group)).ok());
  const int32_t late = size() - 1;
  if (rank() == late) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout * 1.5));
    EXPECT_TRUE(Status(api().barrier(group)).ok());
  } else {
    const auto start = std::chrono::steady_clock::now();
    Status s(api().barrier(group));
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED);
    EXPECT_LT(seconds_since(start), kTimeout + 1.0);
    EXPECT_TRUE(contains(s.message, "barrier on group world/color=0")) << s.message;
    EXPECT_TRUE(contains(s.message, "timed out after 1 s")) << s.message;
    EXPECT_EQ(Status(api().barrier(group)).code, MH_DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(Status(api().barrier(world())).ok());
  api().group_destroy(group);
}

TEST_F(Mpi, RecvTimesOutNamingThePeer) {
  MH_Group* group = nullptr;
  ASSERT_TRUE(Status(api().split(world(), 0, rank(), &group)).ok());
  if (rank() == 0) {
    std::vector<float> got(1);
    auto r = recv_args<float>(got, 1);
    Status s(api().recv(group, &r));
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED);
    EXPECT_TRUE(contains(s.message, "global rank 1 had not sent")) << s.message;
  } else {
    // Half a timeout late, so that this barrier outlasts rank 0's recv.
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout * 0.5));
  }
  EXPECT_TRUE(Status(api().barrier(world())).ok());
  api().group_destroy(group);
}

MH_Request* start(const MH_CommApi& api, MH_Group* group, const MH_CollectiveArgs& a, bool scatter = false) {
  MH_Request* request = nullptr;
  Status s(scatter ? api.reduce_scatter_start(group, &a, &request) : api.all_reduce_start(group, &a, &request));
  EXPECT_TRUE(s.ok()) << s.message;
  return request;
}

TEST_F(Mpi, StartedCollectivesInFlightTogetherGetTheirSums) {
  std::vector<float> a = values_of(rank(), kCount), a_sum(kCount), b(kCount * size()), b_slice(kCount);
  for (int64_t i = 0; i < kCount * size(); ++i) b[i] = value(rank(), i);
  MH_Request* ra = start(api(), world(), args<float>(a, a_sum));
  MH_Request* rb = start(api(), world(), args<float>(b, b_slice), true);
  for (MH_Request* r : {rb, ra}) {
    EXPECT_TRUE(Status(api().request_wait(r)).ok());
    api().request_destroy(r);
  }
  for (int64_t i = 0; i < kCount; ++i) {
    float sum = 0, slice = 0;
    for (int32_t r = 0; r < size(); ++r) {
      sum += value(r, i);
      slice += value(r, rank() * kCount + i);
    }
    ASSERT_EQ(a_sum[i], sum);
    ASSERT_EQ(b_slice[i], slice);
  }
}

// ABI 1.4: the distributed optimizer's overlapped parameter gather, in
// place and in flight beside an all-reduce.
TEST_F(Mpi, AllGatherStartInPlaceFillsEveryBlockWhileAnotherCollectiveRuns) {
  ASSERT_GE(api().struct_size, MH_STRUCT_SIZE(MH_CommApi, all_gather_start));
  std::vector<float> buffer(kCount * size(), -1.0f), a = values_of(rank(), kCount), a_sum(kCount);
  for (int64_t i = 0; i < kCount; ++i) buffer[rank() * kCount + i] = value(rank(), i);
  auto g = args<float>(std::span<const float>(buffer).subspan(rank() * kCount, kCount), std::span<float>(buffer));
  MH_Request* rg = nullptr;
  ASSERT_TRUE(Status(api().all_gather_start(world(), &g, &rg)).ok());
  MH_Request* ra = start(api(), world(), args<float>(a, a_sum));
  for (MH_Request* r : {ra, rg}) {
    EXPECT_TRUE(Status(api().request_wait(r)).ok());
    api().request_destroy(r);
  }
  for (int32_t r = 0; r < size(); ++r)
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(buffer[r * kCount + i], value(r, i));
  for (int64_t i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int32_t r = 0; r < size(); ++r) sum += value(r, i);
    ASSERT_EQ(a_sum[i], sum);
  }
}

// ABI 1.7: rank r sends (r + p) % 3 elements to rank p (some blocks empty).
TEST_F(Mpi, AllToAllDeliversBlocksOfPerPeerCountsInRankOrder) {
  ASSERT_EQ(api().struct_size, MH_STRUCT_SIZE(MH_CommApi, all_to_all));
  const auto count = [](int32_t from, int32_t to) { return int64_t((from + 2 * to) % 3); };
  const auto element = [](int32_t from, int32_t to, int64_t i) { return float(10000 * from + 100 * to + i); };
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<float> send, want;
  for (int32_t p = 0; p < size(); ++p) {
    send_counts.push_back(count(rank(), p));
    recv_counts.push_back(count(p, rank()));
    for (int64_t i = 0; i < count(rank(), p); ++i) send.push_back(element(rank(), p, i));
    for (int64_t i = 0; i < count(p, rank()); ++i) want.push_back(element(p, rank(), i));
  }
  std::vector<float> recv(want.size(), -1.0f);
  auto a = all_to_all_args<float>(send, send_counts, recv, recv_counts);
  Status s(api().all_to_all(world(), &a));
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(recv, want);
}

TEST_F(Mpi, AllToAllTimesOutWhenAPeerIsLate) {
  MH_Group* group = nullptr;
  ASSERT_TRUE(Status(api().split(world(), 0, rank(), &group)).ok());
  const int32_t late = size() - 1;
  // Static: MPI cannot cancel the timed-out collective and may write it later.
  static std::vector<int64_t> counts(size(), 1);
  static std::vector<float> send(size(), 1.0f), recv(size());
  auto a = all_to_all_args<float>(send, counts, recv, counts);
  if (rank() == late) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout * 1.5));
    EXPECT_TRUE(Status(api().all_to_all(group, &a)).ok());
  } else {
    const auto begun = std::chrono::steady_clock::now();
    Status s(api().all_to_all(group, &a));
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED);
    EXPECT_LT(seconds_since(begun), kTimeout + 1.0);
    EXPECT_TRUE(contains(s.message, "all_to_all on group world/color=0")) << s.message;
  }
  EXPECT_TRUE(Status(api().barrier(world())).ok());
  api().group_destroy(group);
}

TEST_F(Mpi, StartedCollectiveTimesOutAtItsWait) {
  MH_Group* group = nullptr;
  ASSERT_TRUE(Status(api().split(world(), 0, rank(), &group)).ok());
  const int32_t late = size() - 1;
  // Static: MPI cannot cancel the timed-out collective and may write it later.
  static std::vector<float> v(4, 1.0f);
  if (rank() == late) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout * 1.5));
    auto a = args<float>(v, v);
    EXPECT_TRUE(Status(api().all_reduce(group, &a)).ok());
  } else {
    const auto begun = std::chrono::steady_clock::now();
    MH_Request* r = start(api(), group, args<float>(v, v));
    Status s(api().request_wait(r));
    api().request_destroy(r);
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED);
    EXPECT_LT(seconds_since(begun), kTimeout + 1.0);
    EXPECT_TRUE(contains(s.message, "all_reduce on group world/color=0")) << s.message;
  }
  EXPECT_TRUE(Status(api().barrier(world())).ok());
  api().group_destroy(group);
}

}  // namespace
}  // namespace mh::comm::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mh::comm::testing::Comm comm(mh::comm::mpi::mpi_component(), {{"timeout_s", mh::comm::testing::kTimeout}});
  mh::comm::testing::g_comm = &comm;
  return RUN_ALL_TESTS();
}
