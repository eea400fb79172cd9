// send / recv of the threads communicator: order per pair, ping-pong, and a
// 1F1B pipeline schedule where neighbouring stages send to each other at the
// same time.
#include "threads_fixture.hpp"

#include <vector>

namespace mh::comm::testing {
namespace {

class ThreadsP2P : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsP2P);

Status send(const Comm& comm, MH_Group* group, const std::vector<float>& data, int32_t peer) {
  auto a = send_args<float>(data, peer);
  return Status(comm.api().send(group, &a));
}

Status recv(const Comm& comm, MH_Group* group, std::vector<float>& data, int32_t peer) {
  auto a = recv_args<float>(data, peer);
  return Status(comm.api().recv(group, &a));
}

TEST_P(ThreadsP2P, PingPongBetweenPairs) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    const int32_t partner = rank ^ 1;
    if (partner >= size()) return;
    std::vector<float> ball(1000, 0.0f);
    for (int32_t hit = 0; hit < 50; ++hit) {
      if ((hit + rank) % 2 == 0) {
        for (float& x : ball) x += 1;
        ASSERT_TRUE(send(comm, world, ball, partner).ok());
      } else {
        ASSERT_TRUE(recv(comm, world, ball, partner).ok());
        ASSERT_EQ(ball[999], static_cast<float>(hit + 1));
      }
    }
  });
}

TEST_P(ThreadsP2P, MessagesBetweenAPairArriveInTheOrderSent) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    if (rank == 0) {
      for (int32_t m = 0; m < 20; ++m)
        for (int32_t peer = 0; peer < size(); ++peer)
          ASSERT_TRUE(send(comm, world, std::vector<float>(3, static_cast<float>(m)), peer).ok());
    }
    for (int32_t m = 0; m < 20; ++m) {
      std::vector<float> got(3);
      ASSERT_TRUE(recv(comm, world, got, 0).ok());
      ASSERT_EQ(got[2], static_cast<float>(m));
    }
  });
}

// Megatron's non-interleaved 1F1B with blocking calls: warm-up forwards,
// then steady 1F1B in which stage s sends its activation to s + 1 just as
// s + 1 sends its gradient back to s, then cool-down backwards. Stage s adds
// 1 to activations and subtracts 1 from gradients.
class Stage {
 public:
  Stage(const Comm& comm, MH_Group* world, int32_t stage, int32_t stages)
      : comm_(comm), world_(world), s_(stage), p_(stages) {}

  void run(int32_t microbatches) {
    const int32_t warmup = std::min(p_ - s_ - 1, microbatches);
    for (int32_t i = 0; i < warmup; ++i) forward();
    for (int32_t i = warmup; i < microbatches; ++i) {
      forward();
      backward();
    }
    for (int32_t i = 0; i < warmup; ++i) backward();
  }

 private:
  static float input_of(int32_t mb) { return static_cast<float>(100 * mb); }

  void forward() {
    const int32_t mb = forwards_++;
    std::vector<float> act(kLen, input_of(mb));
    if (s_ > 0) {
      ASSERT_TRUE(recv(comm_, world_, act, s_ - 1).ok());
      ASSERT_EQ(act[kLen - 1], input_of(mb) + static_cast<float>(s_)) << "stage " << s_ << " mb " << mb;
    }
    for (float& x : act) x += 1;
    if (s_ < p_ - 1) {
      ASSERT_TRUE(send(comm_, world_, act, s_ + 1).ok());
    }
  }

  void backward() {
    const int32_t mb = backwards_++;
    std::vector<float> grad(kLen, -input_of(mb));
    if (s_ < p_ - 1) {
      ASSERT_TRUE(recv(comm_, world_, grad, s_ + 1).ok());
      ASSERT_EQ(grad[0], -input_of(mb) - static_cast<float>(p_ - 1 - s_)) << "stage " << s_ << " mb " << mb;
    }
    for (float& x : grad) x -= 1;
    if (s_ > 0) {
      ASSERT_TRUE(send(comm_, world_, grad, s_ - 1).ok());
    }
  }

  static constexpr int64_t kLen = 4096;
  const Comm& comm_;
  MH_Group* world_;
  int32_t s_, p_;
  int32_t forwards_ = 0, backwards_ = 0;
};

TEST_P(ThreadsP2P, OneForwardOneBackwardPipelineCompletes) {
  Comm comm = make();
  for (int32_t microbatches : {1, size(), 2 * size() + 1})
    run_ranks(comm, [&](int32_t rank, MH_Group* world) { Stage(comm, world, rank, size()).run(microbatches); });
}

TEST_P(ThreadsP2P, NeighboursSendingToEachOtherAtOnceDoNotDeadlock) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    const int32_t right = (rank + 1) % size(), left = (rank + size() - 1) % size();
    std::vector<float> mine(1 << 16, static_cast<float>(rank)), got(1 << 16);
    ASSERT_TRUE(send(comm, world, mine, right).ok());
    ASSERT_TRUE(recv(comm, world, got, left).ok());
    EXPECT_EQ(got[12345], static_cast<float>(left));
  });
}

TEST_P(ThreadsP2P, RecvOfAnotherSizeIsInvalidArgument) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    const int32_t last = size() - 1;
    if (rank == 0) {
      Status s = send(comm, world, std::vector<float>(4), last);
      EXPECT_TRUE(s.ok() || s.code == MH_INVALID_ARGUMENT) << s.message;  // depends on who came first
    }
    if (rank == last) {
      std::vector<float> got(5);
      Status s = recv(comm, world, got, 0);
      EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
      EXPECT_NE(s.message.find("sent 4 f32 elements but global rank " + std::to_string(last) +
                               " posted a recv of 5 f32 elements"),
                std::string::npos)
          << s.message;
    }
  });
}

}  // namespace
}  // namespace mh::comm::testing
