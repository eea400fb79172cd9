// The threads communicator's all_to_all (ABI 1.7): blocks of per-peer counts
// land in rank order, counts are checked pairwise on every rank, and the
// call honours the timeout and abort rules of every collective.
#include "threads_fixture.hpp"

#include <chrono>
#include <thread>
#include <vector>

namespace mh::comm::testing {
namespace {

using std::chrono::steady_clock;

class ThreadsAllToAll : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsAllToAll);

// Elements rank `from` sends rank `to`: 0 for some pairs, so empty blocks are covered.
int64_t block(int32_t from, int32_t to) { return (from + 2 * to) % 3; }

float element(int32_t from, int32_t to, int64_t i) { return float(10000 * from + 100 * to + i); }

struct Exchange {
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<float> send, want;
};

Exchange exchange_of(int32_t rank, int32_t size) {
  Exchange x;
  for (int32_t p = 0; p < size; ++p) {
    x.send_counts.push_back(block(rank, p));
    x.recv_counts.push_back(block(p, rank));
    for (int64_t i = 0; i < block(rank, p); ++i) x.send.push_back(element(rank, p, i));
    for (int64_t i = 0; i < block(p, rank); ++i) x.want.push_back(element(p, rank, i));
  }
  return x;
}

Status all_to_all(const Comm& comm, MH_Group* group, const Exchange& x, std::vector<float>& recv) {
  recv.assign(x.want.size(), -1.0f);
  auto a = all_to_all_args<float>(x.send, x.send_counts, recv, x.recv_counts);
  return Status(comm.api().all_to_all(group, &a));
}

TEST_P(ThreadsAllToAll, TheTableHasIt) {
  Comm comm = make();
  EXPECT_EQ(comm.api().struct_size, MH_STRUCT_SIZE(MH_CommApi, all_to_all));
  EXPECT_NE(comm.api().all_to_all, nullptr);
}

TEST_P(ThreadsAllToAll, EachBlockReachesItsPeerInRankOrder) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    const Exchange x = exchange_of(rank, size());
    std::vector<float> recv;
    Status s = all_to_all(comm, world, x, recv);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(recv, x.want) << "rank " << rank;
  });
}

TEST_P(ThreadsAllToAll, CountsThatDoNotMatchPairwiseAreInvalidArgumentOnEveryRank) {
  if (size() == 1) GTEST_SKIP() << "needs a peer";
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    Exchange x = exchange_of(rank, size());
    if (rank == 0) {  // one more element for rank 1 than rank 1 expects
      x.send_counts[1] += 1;
      x.send.push_back(0);
    }
    std::vector<float> recv;
    Status s = all_to_all(comm, world, x, recv);
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "exchange the counts first")) << s.message;
    // The group stays usable.
    const Exchange good = exchange_of(rank, size());
    EXPECT_TRUE(all_to_all(comm, world, good, recv).ok());
    EXPECT_EQ(recv, good.want);
  });
}

TEST_P(ThreadsAllToAll, CountsBeyondTheBufferAreInvalidArgument) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<int64_t> counts(size(), 2);
    std::vector<float> send(1), recv(2 * size());
    auto a = all_to_all_args<float>(send, counts, recv, counts);
    Status s(comm.api().all_to_all(world, &a));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "send_counts sum to " + std::to_string(2 * size()))) << s.message;
  });
}

TEST_P(ThreadsAllToAll, RefusesABufferOnAnotherDevice) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    const std::vector<int64_t> counts(size(), 1);
    std::vector<float> send(size(), 1.0f), recv(size(), -1.0f);
    auto a = all_to_all_args<float>(send, counts, recv, counts);
    a.send.device = MH_DEVICE_CUDA;
    Status s(comm.api().all_to_all(world, &a));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "send is on cuda:0, but this communicator works on cpu")) << s.message;
    EXPECT_EQ(recv, std::vector<float>(size(), -1.0f));
  });
}

TEST_P(ThreadsAllToAll, TimesOutNamingTheRankThatNeverCame) {
  if (size() == 1) GTEST_SKIP() << "needs a rank that stays away";
  Comm comm = make(0.5);
  const int32_t absent = size() - 1;
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == absent) return;
    const auto start = steady_clock::now();
    std::vector<float> recv;
    Status s = all_to_all(comm, world, exchange_of(rank, size()), recv);
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED) << s.message;
    EXPECT_LT(seconds_since(start), 1.5);
    EXPECT_TRUE(contains(s.message, "all_to_all on group world")) << s.message;
    EXPECT_TRUE(contains(s.message, "global rank " + std::to_string(absent) + " had not arrived")) << s.message;
  });
}

TEST_P(ThreadsAllToAll, AbortWakesEveryRankBlockedInIt) {
  Comm comm = make(30);
  const int32_t failing = size() - 1;
  steady_clock::time_point aborted_at;
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == failing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      aborted_at = steady_clock::now();
      comm.api().abort(comm.self(), rank, "out of memory on device 0");
    }
    std::vector<float> recv;
    Status s = all_to_all(comm, world, exchange_of(rank, size()), recv);
    EXPECT_EQ(s.code, MH_ABORTED);
    EXPECT_TRUE(contains(s.message, "rank " + std::to_string(failing) + " failed: out of memory on device 0"))
        << s.message;
    EXPECT_LT(seconds_since(aborted_at), 1.0);
  });
}

}  // namespace
}  // namespace mh::comm::testing
