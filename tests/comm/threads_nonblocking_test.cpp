// The threads communicator's non-blocking all_reduce, reduce_scatter and
// (ABI 1.4) all_gather: the results of the blocking calls, several in
// flight, progress that does not wait for the starting rank, and aborts
// that reach a waiting rank.
#include "threads_fixture.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace mh::comm::testing {
namespace {

using std::chrono::steady_clock;

class ThreadsNonBlocking : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsNonBlocking);

MH_Request* start(const Comm& comm, MH_Group* group, const MH_CollectiveArgs& a, bool scatter = false) {
  MH_Request* request = nullptr;
  Status s(scatter ? comm.api().reduce_scatter_start(group, &a, &request)
                   : comm.api().all_reduce_start(group, &a, &request));
  EXPECT_TRUE(s.ok()) << s.message;
  return request;
}

Status finish(const Comm& comm, MH_Request* request) {
  Status s(comm.api().request_wait(request));
  comm.api().request_destroy(request);
  return s;
}

TEST_P(ThreadsNonBlocking, TableIsVersion1_4) {
  Comm comm = make();
  EXPECT_GE(comm.api().struct_size, MH_STRUCT_SIZE(MH_CommApi, all_gather_start));
  EXPECT_NE(comm.api().all_gather_start, nullptr);
}

// In place, as the distributed optimizer gathers its updated pieces: each
// rank's block of one buffer, two gathers in flight with an all-reduce
// between them, waited out of order.
TEST_P(ThreadsNonBlocking, AllGatherStartFillsEveryBlockInPlace) {
  Comm comm = make();
  const int32_t n = size();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    constexpr int64_t k = 3;
    std::vector<float> first(size_t(k * n), -1.0f), second(size_t(n), -1.0f), sum(2, 1.0f);
    for (int64_t i = 0; i < k; ++i) first[size_t(rank * k + i)] = float(rank * 10 + i);
    second[size_t(rank)] = float(rank + 100);
    auto a = args<float>(std::span<const float>(first).subspan(size_t(rank * k), k), std::span<float>(first));
    auto b = args<float>(std::span<const float>(second).subspan(size_t(rank), 1), std::span<float>(second));
    MH_Request* ra = nullptr;
    MH_Request* rb = nullptr;
    ASSERT_TRUE(Status(comm.api().all_gather_start(world, &a, &ra)).ok());
    MH_Request* rs = start(comm, world, args<float>(sum, sum));
    ASSERT_TRUE(Status(comm.api().all_gather_start(world, &b, &rb)).ok());
    for (MH_Request* r : {rb, rs, ra}) EXPECT_TRUE(finish(comm, r).ok());
    for (int32_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < k; ++i) EXPECT_EQ(first[size_t(r * k + i)], float(r * 10 + i)) << "rank " << r;
      EXPECT_EQ(second[size_t(r)], float(r + 100)) << "rank " << r;
    }
    EXPECT_EQ(sum[0], float(n));
  });
}

TEST_P(ThreadsNonBlocking, SeveralInFlightEachGetTheirSums) {
  Comm comm = make();
  const int32_t n = size();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    // Three all-reduces (one in place) and a reduce-scatter, waited in reverse.
    std::vector<float> a(5, float(rank)), a_out(5), b(3, 1.0f), c(7, float(rank + 1));
    std::vector<float> d(size_t(2 * n)), d_out(2);
    for (int32_t i = 0; i < 2 * n; ++i) d[size_t(i)] = float(rank * 100 + i);
    MH_Request* ra = start(comm, world, args<float>(a, a_out));
    MH_Request* rb = start(comm, world, args<float>(b, b));
    MH_Request* rc = start(comm, world, args<float>(c, c, MH_REDUCE_MAX));
    MH_Request* rd = start(comm, world, args<float>(d, d_out), true);
    for (MH_Request* r : {rd, rc, rb, ra}) EXPECT_TRUE(finish(comm, r).ok());
    for (float v : a_out) EXPECT_EQ(v, float(n * (n - 1) / 2));
    for (float v : b) EXPECT_EQ(v, float(n));
    for (float v : c) EXPECT_EQ(v, float(n));
    for (int32_t i = 0; i < 2; ++i)  // slice `rank`: sum over ranks r of r * 100 + (2 * rank + i)
      EXPECT_EQ(d_out[size_t(i)], float(100 * n * (n - 1) / 2 + n * (2 * rank + i)));
  });
}

TEST_P(ThreadsNonBlocking, BlockingCallAfterAStartRunsAfterIt) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    std::vector<float> first(4, 1.0f), second(4, 2.0f);
    MH_Request* r = start(comm, world, args<float>(first, first));
    auto a = args<float>(second, second);
    EXPECT_TRUE(Status(comm.api().all_reduce(world, &a)).ok());
    EXPECT_TRUE(finish(comm, r).ok());
    EXPECT_EQ(first[0], float(size()));
    EXPECT_EQ(second[0], float(2 * size()));
  });
}

// Rank 0 starts and then holds off waiting until every other rank has its
// result: only a reduction that progresses on its own lets them finish.
TEST_P(ThreadsNonBlocking, ProgressesWhileTheStartingRankDoesOtherWork) {
  if (size() == 1) GTEST_SKIP() << "needs peers";
  Comm comm = make(5);
  std::atomic<int32_t> peers_done{0};
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    std::vector<float> v(1000, 1.0f);
    MH_Request* r = start(comm, world, args<float>(v, v));
    if (rank != 0) {
      EXPECT_TRUE(finish(comm, r).ok());
      ++peers_done;
      return;
    }
    const auto until = steady_clock::now() + std::chrono::seconds(3);
    while (peers_done < size() - 1 && steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(peers_done, size() - 1) << "the peers could not finish before rank 0 waited";
    EXPECT_TRUE(finish(comm, r).ok());
    EXPECT_EQ(v[999], float(size()));
  });
}

TEST_P(ThreadsNonBlocking, AbortReachesARankWaitingOnARequest) {
  if (size() == 1) GTEST_SKIP() << "needs a rank that stays away";
  Comm comm = make(30);
  const int32_t failing = size() - 1;
  steady_clock::time_point aborted_at = steady_clock::now() + std::chrono::hours(1);
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == failing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      aborted_at = steady_clock::now();
      comm.api().abort(comm.self(), rank, "injected failure");
      return;
    }
    std::vector<float> v(8, 1.0f);
    Status s = finish(comm, start(comm, world, args<float>(v, v)));
    EXPECT_EQ(s.code, MH_ABORTED) << s.message;
    EXPECT_NE(s.message.find("rank " + std::to_string(failing) + " failed: injected failure"), std::string::npos)
        << s.message;
    EXPECT_LT(seconds_since(aborted_at), 1.0);
  });
}

TEST_P(ThreadsNonBlocking, TimesOutLikeTheBlockingCall) {
  if (size() == 1) GTEST_SKIP() << "needs a rank that stays away";
  Comm comm = make(0.5);
  std::vector<float> v(8, 1.0f);
  const auto begun = steady_clock::now();
  Status s = finish(comm, start(comm, comm.world(0), args<float>(v, v)));
  EXPECT_EQ(s.code, MH_DEADLINE_EXCEEDED) << s.message;
  EXPECT_LT(seconds_since(begun), 1.5);
  EXPECT_NE(s.message.find("all_reduce on group world"), std::string::npos) << s.message;
}

TEST_P(ThreadsNonBlocking, DestroyingAnUnwaitedRequestWaitsForIt) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t, MH_Group* world) {
    std::vector<float> v(64, 1.0f);
    comm.api().request_destroy(start(comm, world, args<float>(v, v)));
    EXPECT_EQ(v[63], float(size()));  // its buffer was written before destroy returned
  });
}

}  // namespace
}  // namespace mh::comm::testing
