// How --calibrate turns collective timings into a profile's bus bandwidth,
// the latency being measured on a near-empty message.
#include "tuner/calibrate.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mh
