// How --calibrate turns collective timings into a profile's bus bandwidth,
// the latency being measured on a near-empty message.
#include "tuner/calibrate.hpp"

#include <megahost/error.hpp>

#include <gtest/gtest.h>

#include <vector>

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

TEST(CalibrationModes, AreQuickAndFullAndNothingElse) {
  EXPECT_EQ(calibration_mode("quick"), CalibrationMode::kQuick);
  EXPECT_EQ(calibration_mode("full"), CalibrationMode::kFull);
  EXPECT_THROW(calibration_mode("fast"), Error);
}

}  // namespace
}  // namespace mh
