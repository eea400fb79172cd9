// How --calibrate turns collective timings into a profile's bus bandwidth,
// the latency being measured on a near-empty message.
#include "tuner/calibrate.hpp"

#include <megahost/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "support/engine_env.hpp"
#include "tuner/calibration_team.hpp"

namespace mh {
namespace {

TEST(CalibratedCollectives, BandwidthIsTheSlopeOfTheTimeAboveTheMeasuredLatency) {
  const double bytes[] = {65536, 1 << 20, 8 << 20};
  double seconds[3];
  for (int i = 0; i < 3; ++i) seconds[i] = 20e-6 + bytes[i] / 5e9 + (i == 1 ? 3e-6 : 0);  // 3 us of noise
  EXPECT_NEAR(fitted_bus_bandwidth(20e-6, bytes, seconds) / 5e9, 1.0, 0.01);
}

TEST(CalibratedCollectives, MessagesNoSlowerThanTheLatencyGiveABandwidthTooLargeToMatter) {
  const double bytes[] = {65536, 1 << 20};
  const double seconds[] = {20e-6, 19e-6};
  EXPECT_GT(fitted_bus_bandwidth(20e-6, bytes, seconds), 1e20);
}

// A burst of other work slows one pass of a rate; the median of the passes
// keeps the others', and two passes that agree settle the rate.
TEST(CalibratedRates, TheMedianOfInterleavedPassesIgnoresOneSlowedPass) {
  EXPECT_DOUBLE_EQ(median_seconds({1.0, 9.0, 1.1}), 1.1);
  EXPECT_DOUBLE_EQ(median_seconds({2.0, 1.0}), 1.5);
  EXPECT_TRUE(passes_agree(std::vector<double>{1.0, 1.4}));
  EXPECT_FALSE(passes_agree(std::vector<double>{1.0, 3.0}));
  EXPECT_TRUE(passes_agree(std::vector<double>{1.0, 3.0, 1.2}));  // measured again: two agree
  EXPECT_FALSE(passes_agree(std::vector<double>{1.0, 3.0, 9.0}));
}

// Each rank's every third call is 200 times slower, as when another process
// preempts a thread of its team.
CalibrationTeam::Prepare sometimes_preempted() {
  return [](Device&, int) -> std::function<void()> {
    auto calls = std::make_shared<int>(0);
    return [calls] { std::this_thread::sleep_for(std::chrono::milliseconds(++*calls % 3 == 0 ? 200 : 1)); };
  };
}

// Where the team's threads fit the cores, a preempted call says nothing of
// the machine: a round is its median call, 1 ms and the sleep's overshoot
// (a loaded machine wakes a sleeper late by milliseconds), far below the
// mean call's 61 ms.
TEST(CalibrationTeams, TimeTheMedianCallWhereTheirThreadsFitTheCores) {
  test::EngineEnv env("[kernels]\nthreads = 1\n");
  const CalibrationTeam team(env.slot(MH_KIND_KERNELS), 1, 1);
  ASSERT_FALSE(team.oversubscribed());
  for (double seconds : team.round_seconds(sometimes_preempted(), 3, 0.03)) EXPECT_LT(seconds, 0.030);
}

// Where they outnumber the cores, time slicing is what is measured: a round
// is its length over its calls, the mean call.
TEST(CalibrationTeams, TimeTheWholeRoundWhereTheirThreadsOutnumberTheCores) {
  test::EngineEnv env("[kernels]\nthreads = 1\n");
  const int ranks = int(std::max(1u, std::thread::hardware_concurrency())) + 1;
  const CalibrationTeam team(env.slot(MH_KIND_KERNELS), ranks, ranks);
  ASSERT_TRUE(team.oversubscribed());
  for (double seconds : team.round_seconds(sometimes_preempted(), 3, 0.03)) EXPECT_GT(seconds, 0.030);
}

TEST(CalibrationModes, AreQuickAndFullAndNothingElse) {
  EXPECT_EQ(calibration_mode("quick"), CalibrationMode::kQuick);
  EXPECT_EQ(calibration_mode("full"), CalibrationMode::kFull);
  EXPECT_THROW(calibration_mode("fast"), Error);
}

}  // namespace
}  // namespace mh
