// How the threads communicator fails: timeouts, aborts and bad arguments.
#include "threads_fixture.hpp"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace mh::comm::testing {
namespace {

using std::chrono::steady_clock;

class ThreadsFailure : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsFailure);

Status all_reduce(const Comm& comm, MH_Group* group, int64_t n = 4) {
  std::vector<float> send(n, 1.0f), recv(n);
  auto a = args<float>(send, recv);
  return Status(comm.api().all_reduce(group, &a));
}

TEST_P(ThreadsFailure, CollectiveTimesOutNamingItAndTheRankThatNeverCame) {
  if (size() == 1) GTEST_SKIP() << "needs a rank that stays away";
  Comm comm = make(0.5);
  const int32_t absent = size() - 1;
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == absent) return;
    const auto start = steady_clock::now();
    Status s = all_reduce(comm, world);
    EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED) << s.message;
    EXPECT_LT(seconds_since(start), 1.5);
    EXPECT_TRUE(contains(s.message, "all_reduce on group world")) << s.message;
    EXPECT_TRUE(contains(s.message, "global rank " + std::to_string(absent) + " had not arrived")) << s.message;
  });
  // The ranks no longer agree on where they are, so the group stays failed.
  Status late = all_reduce(comm, comm.world(absent));
  EXPECT_EQ(late.code, MH_DEADLINE_EXCEEDED);
  EXPECT_TRUE(contains(late.message, "unusable after a timeout")) << late.message;
}

TEST_P(ThreadsFailure, RecvTimesOutWhenNothingIsSent) {
  Comm comm = make(0.5);
  const auto start = steady_clock::now();
  std::vector<float> got(1);
  auto a = recv_args<float>(got, size() - 1);
  Status s(comm.api().recv(comm.world(0), &a));
  EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED);
  EXPECT_LT(seconds_since(start), 1.5);
  EXPECT_TRUE(contains(s.message, "recv on group world")) << s.message;
  EXPECT_TRUE(contains(s.message, "global rank " + std::to_string(size() - 1) + " had not sent")) << s.message;
}

TEST_P(ThreadsFailure, AbortWakesEveryRankBlockedInAllReduce) {
  Comm comm = make(30);
  const int32_t failing = size() - 1;
  steady_clock::time_point aborted_at;
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == failing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      aborted_at = steady_clock::now();
      comm.api().abort(comm.self(), rank, "out of memory on device 0");
    }
    Status s = all_reduce(comm, world);
    EXPECT_EQ(s.code, MH_ABORTED);
    EXPECT_TRUE(contains(s.message, "rank " + std::to_string(failing) + " failed: out of memory on device 0"))
        << s.message;
    EXPECT_LT(seconds_since(aborted_at), 1.0);
    EXPECT_EQ(Status(comm.api().barrier(world)).code, MH_ABORTED);
  });
}

TEST_P(ThreadsFailure, AbortWakesWaitersOnSplitGroupsAndRecvs) {
  Comm comm = make(30);
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    MH_Group* pair = nullptr;
    ASSERT_TRUE(Status(comm.api().split(world, rank / 2, rank, &pair)).ok());
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.api().abort(comm.self(), 0, "injected");
    } else {
      std::vector<float> got(1);
      auto a = recv_args<float>(got, 0);
      Status s(comm.api().recv(rank % 2 == 1 ? pair : world, &a));
      EXPECT_EQ(s.code, MH_ABORTED);
      EXPECT_TRUE(contains(s.message, "rank 0 failed: injected")) << s.message;
    }
    comm.api().group_destroy(pair);
  });
}

TEST_P(ThreadsFailure, WrongAllGatherCountIsInvalidArgumentAndTheGroupStaysUsable) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    std::vector<float> send(2), recv(2 * size() + 1);
    auto a = args<float>(send, recv);
    Status s(comm.api().all_gather(world, &a));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "recv has " + std::to_string(2 * size() + 1) +
                                        " elements; it must have group size x send"))
        << s.message;
    EXPECT_TRUE(all_reduce(comm, world).ok());
  });
}

TEST_P(ThreadsFailure, CountsThatDifferBetweenRanksAreInvalidArgumentOnEveryRank) {
  if (size() == 1) GTEST_SKIP() << "needs two ranks to disagree";
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    Status s = all_reduce(comm, world, rank == 0 ? 4 : 5);
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "global rank 1 passed count 5 but global rank 0 passed count 4")) << s.message;
    EXPECT_TRUE(all_reduce(comm, world).ok());
  });
}

TEST_P(ThreadsFailure, DifferentCollectivesAtOnceAreInvalidArgument) {
  if (size() == 1) GTEST_SKIP() << "needs two ranks to disagree";
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    Status s = rank == 1 ? Status(comm.api().barrier(world)) : all_reduce(comm, world);
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "global rank 1 called barrier but global rank 0 called all_reduce"))
        << s.message;
  });
}

TEST_P(ThreadsFailure, OneRanksBadArgumentFailsTheCallOnEveryRank) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> send(2), recv(2);
    auto a = args<float>(send, recv, MH_REDUCE_SUM, rank == 0 ? size() : 0);
    Status s(comm.api().broadcast(world, &a));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(s.message, "global rank 0: root " + std::to_string(size()) + " is not a rank")) << s.message;
  });
}

TEST_P(ThreadsFailure, ReductionOfF16IsUnimplemented) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    std::vector<uint16_t> send(2), recv(2);
    auto a = args<uint16_t>(send, recv);
    a.send.dtype = a.recv.dtype = MH_F16;
    Status s(comm.api().all_reduce(world, &a));
    EXPECT_EQ(s.code, MH_UNIMPLEMENTED);
    EXPECT_TRUE(contains(s.message, "not f16")) << s.message;
  });
}

TEST_P(ThreadsFailure, PeerOutsideTheGroupIsInvalidArgument) {
  Comm comm = make();
  std::vector<float> data(1);
  auto a = send_args<float>(data, size());
  Status s(comm.api().send(comm.world(0), &a));
  EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "send on group world")) << s.message;
}

TEST_P(ThreadsFailure, DeviceStreamIsUnimplemented) {
  Comm comm = make();
  std::vector<float> data(1);
  auto a = send_args<float>(data, 0);
  int stream = 0;
  a.stream = &stream;
  EXPECT_EQ(Status(comm.api().send(comm.world(0), &a)).code, MH_UNIMPLEMENTED);
}

TEST_P(ThreadsFailure, NonContiguousBufferIsInvalidArgument) {
  Comm comm = make();
  std::vector<float> data(8);
  auto a = send_args<float>(data, 0);
  a.send.ndim = 2;
  a.send.shape[0] = 2;
  a.send.shape[1] = 2;
  a.send.strides[0] = 4;
  a.send.strides[1] = 1;
  Status s(comm.api().send(comm.world(0), &a));
  EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "not contiguous")) << s.message;
}

}  // namespace
}  // namespace mh::comm::testing
