// How --calibrate turns collective timings into a profile's bus bandwidth,
// the latency being measured on a near-empty message.
#include "tuner/calibrate.hpp"

#include <megahost/error.hpp>

#include <gtest/gtest.h>

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

// Two ranks' calls over 2 rounds of 3 calls each, every third call stalled
// 200 ms as when another process preempts a thread of the team; each
// round lasted its 3 calls' 202 ms.
const std::vector<std::vector<double>> kSometimesPreempted = {
    {0.001, 0.001, 0.2}, {0.001, 0.2, 0.001}, {0.2, 0.001, 0.001}, {0.001, 0.001, 0.2}};
const std::vector<double> kRoundLengths = {0.202, 0.202};

// Where the team's threads fit the cores, a preempted call says nothing of
// the machine: a round's figure is its median call.
TEST(CalibrationTeams, TimeTheMedianCallWhereTheirThreadsFitTheCores) {
  EXPECT_EQ(round_figures(kSometimesPreempted, kRoundLengths, 3, false), (std::vector<double>{0.001, 0.001}));
}

// Where they outnumber the cores, time slicing is what is measured: a round
// is its length over its calls, the mean call.
TEST(CalibrationTeams, TimeTheWholeRoundWhereTheirThreadsOutnumberTheCores) {
  const std::vector<double> figures = round_figures(kSometimesPreempted, kRoundLengths, 3, true);
  ASSERT_EQ(figures.size(), 2u);
  for (double seconds : figures) EXPECT_DOUBLE_EQ(seconds, 0.202 / 3);
}

// Teams outnumber the cores when their threads do, one per rank here.
TEST(CalibrationTeams, AreOversubscribedWhenTheirThreadsOutnumberTheCores) {
  test::EngineEnv env("[kernels]\nthreads = 1\n");
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_FALSE(CalibrationTeam(env.slot(MH_KIND_KERNELS), 1, 1).oversubscribed());
  EXPECT_FALSE(CalibrationTeam(env.slot(MH_KIND_KERNELS), cores, cores).oversubscribed());
  EXPECT_TRUE(CalibrationTeam(env.slot(MH_KIND_KERNELS), cores + 1, cores + 1).oversubscribed());
}

// A cold round copies megabytes before each call, so it makes a few calls
// where a warm one fills its time with thousands of a short call.
TEST(CalibrationTeams, TimeFewCallsWhenColdAndFillTheRoundWhenWarm) {
  test::EngineEnv env("[kernels]\nthreads = 1\n");
  const CalibrationTeam alone(env.slot(MH_KIND_KERNELS), 1, 1);
  auto calls_of = [&](bool cold) {
    auto calls = std::make_shared<int>(0);
    alone.round_seconds([calls](Device&, int) { return [calls] { ++*calls; }; }, 3, 0.003, cold);
    return *calls;
  };
  EXPECT_LE(calls_of(true), 1 + 3 * 16);  // the warm-up call, then 16 a round at most
  EXPECT_GT(calls_of(false), 1 + 3 * 16);
}

TEST(CalibrationModes, AreQuickAndFullAndNothingElse) {
  EXPECT_EQ(calibration_mode("quick"), CalibrationMode::kQuick);
  EXPECT_EQ(calibration_mode("full"), CalibrationMode::kFull);
  EXPECT_THROW(calibration_mode("fast"), Error);
}

}  // namespace
}  // namespace mh
