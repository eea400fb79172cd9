// The nccl communicator on the devices of this machine: ranks as threads,
// one device each (up to four), buffers from one cuda kernels instance per
// rank and collectives on that instance's stream, as the engine runs them.
// Tests that need two ranks skip on a one-device machine; everything skips
// without a device.
#include "comm_harness.hpp"
#include "gpu_harness.hpp"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>

namespace mh::gpu_test {
namespace {

using comm::testing::Comm;
using comm::testing::Status;

class NcclWorld : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
    world_ = std::min(devices, 4);
  }

  // The communicator and one fp32 cuda kernels instance per rank (device = rank).
  void start(double timeout_s = 30) {
    comm_ = std::make_unique<Comm>(only_component(MH_COMM_NCCL_MODULE),
                                   comm::testing::Overrides{{"world_size", world_}, {"timeout_s", timeout_s}});
    for (int32_t r = 0; r < world_; ++r) {
      CudaOrReason cuda = open_cuda({{"device", std::to_string(r)}, {"dtype", "\"fp32\""}, {"peak_tflops", "1"}}, r);
      kernels_.push_back(std::move(cuda.kernels));
    }
  }

  // f32 buffers of `n` elements on the rank's device.
  MH_CollectiveArgs args(int32_t rank, const DeviceBuffer* send, int64_t send_n, const DeviceBuffer* recv,
                         int64_t recv_n, int32_t op = MH_REDUCE_SUM, int32_t peer = 0) const {
    MH_CollectiveArgs a{};
    a.struct_size = sizeof(a);
    a.send = send != nullptr ? send->view(MH_F32, {send_n}) : view(nullptr, MH_F32, {send_n});
    a.recv = recv != nullptr ? recv->view(MH_F32, {recv_n}) : view(nullptr, MH_F32, {recv_n});
    a.op = op;
    a.peer = peer;
    a.stream = kernels(rank).stream();
    return a;
  }
  const Kernels& kernels(int32_t rank) const { return *kernels_[size_t(rank)]; }
  std::unique_ptr<DeviceBuffer> floats(int32_t rank, const std::vector<float>& values) const {
    auto buffer = std::make_unique<DeviceBuffer>(kernels(rank), values.size() * sizeof(float));
    buffer->upload(encode(values, MH_F32));
    return buffer;
  }
  static std::vector<float> read(const DeviceBuffer& buffer) { return decode(buffer.download(), MH_F32); }

  int32_t world_ = 0;
  std::vector<std::unique_ptr<Kernels>> kernels_;
  std::unique_ptr<Comm> comm_;  // destroyed before the kernels: its groups' buffers are theirs
};

TEST_F(NcclWorld, AllReducesSumAndMaxOnTheKernelsStream) {
  start();
  const float W = float(world_);
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    auto data = floats(rank, std::vector<float>(1000, float(rank + 1)));
    MH_CollectiveArgs a = args(rank, data.get(), 1000, data.get(), 1000);
    Status sum(comm_->api().all_reduce(group, &a));
    ASSERT_TRUE(sum.ok()) << sum.message;
    EXPECT_EQ(read(*data), std::vector<float>(1000, W * (W + 1) / 2));
    a.op = MH_REDUCE_MAX;
    Status max(comm_->api().all_reduce(group, &a));
    ASSERT_TRUE(max.ok()) << max.message;
    EXPECT_EQ(read(*data), std::vector<float>(1000, W * (W + 1) / 2));
  });
}

TEST_F(NcclWorld, StartedReductionsInFlightTogetherCompleteAtTheirWaits) {
  start();
  const float W = float(world_);
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    auto sum = floats(rank, std::vector<float>(1000, float(rank + 1)));
    auto whole = floats(rank, std::vector<float>(size_t(4 * world_), 1.0f));
    auto slice = floats(rank, std::vector<float>(4, 0.0f));
    const MH_CollectiveArgs a = args(rank, sum.get(), 1000, sum.get(), 1000);
    const MH_CollectiveArgs b = args(rank, whole.get(), 4 * world_, slice.get(), 4);
    MH_Request *ra = nullptr, *rb = nullptr;
    ASSERT_TRUE(Status(comm_->api().all_reduce_start(group, &a, &ra)).ok());
    ASSERT_TRUE(Status(comm_->api().reduce_scatter_start(group, &b, &rb)).ok());
    for (MH_Request* r : {rb, ra}) {
      Status s(comm_->api().request_wait(r));
      comm_->api().request_destroy(r);
      EXPECT_TRUE(s.ok()) << s.message;
    }
    EXPECT_EQ(read(*sum), std::vector<float>(1000, W * (W + 1) / 2));
    EXPECT_EQ(read(*slice), std::vector<float>(4, W));
  });
}

TEST_F(NcclWorld, GathersScattersAndBroadcasts) {
  start();
  const int64_t n = 37;
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    auto mine = floats(rank, std::vector<float>(n, float(rank)));
    auto all = floats(rank, std::vector<float>(size_t(n * world_), -1.0f));
    MH_CollectiveArgs gather = args(rank, mine.get(), n, all.get(), n * world_);
    Status gathered(comm_->api().all_gather(group, &gather));
    ASSERT_TRUE(gathered.ok()) << gathered.message;
    std::vector<float> expected;
    for (int32_t r = 0; r < world_; ++r) expected.insert(expected.end(), size_t(n), float(r));
    EXPECT_EQ(read(*all), expected);

    MH_CollectiveArgs scatter = args(rank, all.get(), n * world_, mine.get(), n);
    Status scattered(comm_->api().reduce_scatter(group, &scatter));
    ASSERT_TRUE(scattered.ok()) << scattered.message;
    EXPECT_EQ(read(*mine), std::vector<float>(n, float(rank * world_)));

    auto root_data = floats(rank, std::vector<float>(n, rank == 0 ? 42.0f : 0.0f));
    MH_CollectiveArgs broadcast = args(rank, root_data.get(), n, root_data.get(), n);
    Status broadcasted(comm_->api().broadcast(group, &broadcast));
    ASSERT_TRUE(broadcasted.ok()) << broadcasted.message;
    EXPECT_EQ(read(*root_data), std::vector<float>(n, 42.0f));
  });
}

// Rank r sends (r + 2p) % 3 elements to rank p: per-peer counts, some empty
// (one rank on a one-device machine sends itself its own block).
TEST_F(NcclWorld, AllToAllDeliversBlocksOfPerPeerCountsInRankOrder) {
  start();
  const auto count = [](int32_t from, int32_t to) { return int64_t((from + 2 * to) % 3 + (from == to)); };
  const auto element = [](int32_t from, int32_t to, int64_t i) { return float(10000 * from + 100 * to + i); };
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    std::vector<int64_t> send_counts, recv_counts;
    std::vector<float> sent, want;
    for (int32_t p = 0; p < world_; ++p) {
      send_counts.push_back(count(rank, p));
      recv_counts.push_back(count(p, rank));
      for (int64_t i = 0; i < count(rank, p); ++i) sent.push_back(element(rank, p, i));
      for (int64_t i = 0; i < count(p, rank); ++i) want.push_back(element(p, rank, i));
    }
    auto send = floats(rank, sent);
    auto recv = floats(rank, std::vector<float>(want.size(), -1.0f));
    MH_AllToAllArgs a{};
    a.struct_size = sizeof(a);
    a.send = send->view(MH_F32, {int64_t(sent.size())});
    a.recv = recv->view(MH_F32, {int64_t(want.size())});
    a.send_counts = send_counts.data();
    a.recv_counts = recv_counts.data();
    a.stream = kernels(rank).stream();
    Status s(comm_->api().all_to_all(group, &a));
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(read(*recv), want);
  });
}

TEST_F(NcclWorld, SplitsByColorOrderedByKey) {
  start();
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* world) {
    MH_Group* half = nullptr;
    Status split(comm_->api().split(world, rank % 2, -rank, &half));
    ASSERT_TRUE(split.ok()) << split.message;
    const int32_t size = (world_ + 1 - rank % 2) / 2;
    EXPECT_EQ(comm_->api().group_size(half), size);
    EXPECT_EQ(comm_->api().group_rank(half), size - 1 - rank / 2) << "keys -rank order the group backwards";
    auto data = floats(rank, {float(rank)});
    MH_CollectiveArgs a = args(rank, data.get(), 1, data.get(), 1);
    Status sum(comm_->api().all_reduce(half, &a));
    ASSERT_TRUE(sum.ok()) << sum.message;
    float expected = 0;
    for (int32_t r = rank % 2; r < world_; r += 2) expected += float(r);
    EXPECT_EQ(read(*data), std::vector<float>{expected});
    Status barrier(comm_->api().barrier(half));
    EXPECT_TRUE(barrier.ok()) << barrier.message;
    comm_->api().group_destroy(half);
  });
}

// Host memory is refused whether its tensors say so (MH_Tensor.device) or
// claim the rank's device (the memory itself is checked too).
TEST_F(NcclWorld, RefusesHostMemoryAndStaysUsable) {
  start();
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    std::vector<float> host(8, 1.0f);
    MH_CollectiveArgs a = args(rank, nullptr, 8, nullptr, 8);
    a.send.data = a.recv.data = host.data();
    Status said(comm_->api().all_reduce(group, &a));
    EXPECT_EQ(said.code, MH_INVALID_ARGUMENT);
    EXPECT_NE(said.message.find("send is on cpu, but this communicator works on cuda:" + std::to_string(rank)),
              std::string::npos)
        << said.message;
    a.send = placed(a.send, kernels(rank).placement());
    a.recv = placed(a.recv, kernels(rank).placement());
    Status refused(comm_->api().all_reduce(group, &a));
    EXPECT_EQ(refused.code, MH_INVALID_ARGUMENT);
    EXPECT_NE(refused.message.find("is not memory of CUDA device"), std::string::npos) << refused.message;
    auto data = floats(rank, std::vector<float>(8, 1.0f));
    MH_CollectiveArgs ok = args(rank, data.get(), 8, data.get(), 8);
    Status after(comm_->api().all_reduce(group, &ok));
    EXPECT_TRUE(after.ok()) << after.message;
  });
}

TEST_F(NcclWorld, SendsAndReceivesBetweenPairs) {
  if (world_ < 2) GTEST_SKIP() << "needs two CUDA devices";
  start();
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    if (rank + 1 == world_ && rank % 2 == 0) return;  // odd world: the last rank has no partner
    auto data = floats(rank, std::vector<float>(100, rank % 2 == 0 ? float(rank) : -1.0f));
    const bool sender = rank % 2 == 0;
    MH_CollectiveArgs a = sender ? args(rank, data.get(), 100, nullptr, 0, MH_REDUCE_SUM, rank + 1)
                                 : args(rank, nullptr, 0, data.get(), 100, MH_REDUCE_SUM, rank - 1);
    Status s(sender ? comm_->api().send(group, &a) : comm_->api().recv(group, &a));
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(read(*data), std::vector<float>(100, float(rank - rank % 2)));
  });
}

TEST_F(NcclWorld, TimesOutWhenARankNeverComesAndStaysBroken) {
  if (world_ < 2) GTEST_SKIP() << "needs two CUDA devices";
  start(2.0);
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    if (rank != 0) return;
    auto data = floats(rank, {1.0f});
    MH_CollectiveArgs a = args(rank, data.get(), 1, data.get(), 1);
    const auto start_time = std::chrono::steady_clock::now();
    Status timed_out(comm_->api().all_reduce(group, &a));
    EXPECT_EQ(timed_out.code, MH_DEADLINE_EXCEEDED) << timed_out.message;
    EXPECT_NE(timed_out.message.find("timed out after 2 s"), std::string::npos) << timed_out.message;
    EXPECT_LT(comm::testing::seconds_since(start_time), 10.0);
    Status again(comm_->api().all_reduce(group, &a));
    EXPECT_EQ(again.code, MH_DEADLINE_EXCEEDED);
    EXPECT_NE(again.message.find("unusable"), std::string::npos) << again.message;
  });
}

TEST_F(NcclWorld, AbortWakesRanksWaitingForTheFailedOne) {
  if (world_ < 2) GTEST_SKIP() << "needs two CUDA devices";
  start(60.0);
  comm::testing::run_ranks(*comm_, [&](int32_t rank, MH_Group* group) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      comm_->api().abort(comm_->self(), 1, "injected failure");
      return;
    }
    auto data = floats(rank, {1.0f});
    MH_CollectiveArgs a = args(rank, data.get(), 1, data.get(), 1);
    const auto start_time = std::chrono::steady_clock::now();
    Status aborted(comm_->api().all_reduce(group, &a));
    EXPECT_EQ(aborted.code, MH_ABORTED) << aborted.message;
    EXPECT_NE(aborted.message.find("rank 1 failed: injected failure"), std::string::npos) << aborted.message;
    EXPECT_LT(comm::testing::seconds_since(start_time), 30.0) << "woken by the abort, not by the 60 s timeout";
  });
}

}  // namespace
}  // namespace mh::gpu_test
