// The cost model's view of a hardware profile: GEMM rates looked up by
// shape, memory-bound ops at their bandwidth, collectives at latency plus
// bytes over bus bandwidth with nccl-tests' ring factors.
#include "machine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "test_machine.hpp"

namespace mh::tuner {
namespace {

using testing::TestMachine;
using ::testing::HasSubstr;

TEST(RingFactor, IsNcclTestsBusBandwidthConvention) {
  EXPECT_DOUBLE_EQ(ring_factor(Coll::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(ring_factor(Coll::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(ring_factor(Coll::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(ring_factor(Coll::kSendRecv, 2), 1.0);
}

TEST(GemmRate, IsTheMeasuredRateAtAMeasuredShape) {
  TestMachine t;
  t.gemm = {{1, 0, 1, 256, 256, 256, 1e11}, {1, 0, 1, 1024, 1024, 1024, 4e11}};
  Machine m(t.view());
  EXPECT_NEAR(m.gemm_seconds(1, 1024, 1024, 1024, Sharing{1, 1}), 2.0 * std::pow(1024.0, 3) / 4e11, 1e-12);
}

TEST(GemmRate, BetweenMeasuredShapesLiesBetweenTheirRates) {
  TestMachine t;
  t.gemm = {{1, 0, 1, 256, 256, 256, 1e11}, {1, 0, 1, 1024, 1024, 1024, 4e11}};
  Machine m(t.view());
  const double rate = 2.0 * std::pow(512.0, 3) / m.gemm_seconds(1, 512, 512, 512, Sharing{1, 1});
  EXPECT_GT(rate, 1e11);
  EXPECT_LT(rate, 4e11);
  EXPECT_NEAR(rate, 2e11, 1e9);  // halfway in log space, equally far from both
}

TEST(GemmRate, ShapesTooThinForTheRateAreBoundByStreamingTheOperands) {
  TestMachine t;
  t.gemm = {{1, 0, 1, 1024, 1024, 1024, 1e15}};  // compute is free: only the bytes count
  Machine m(t.view());
  // One row times a 4096 x 4096 bf16 matrix: 2 * (4096 + 4096^2 + 4096) bytes at 1e11 B/s.
  EXPECT_NEAR(m.gemm_seconds(1, 1, 4096, 4096, Sharing{1, 1}), 2.0 * (4096.0 + 4096.0 * 4096 + 4096) / 1e11, 1e-9);
}

// --calibrate measures the fixed cost of a kernels call (the pseudo-op
// "call", one byte per call); a profile without it, as the published GPU
// profiles are, prices none.
TEST(CallOverhead, IsTheCalibratedCostOfACallAndNothingWithoutOne) {
  TestMachine t;
  EXPECT_EQ(Machine(t.view()).call_seconds(Sharing{1, 1}), 0.0);
  t.measured = {{"call", 1, 0, 1, 1.0, 2e5}};  // 5 us per call
  EXPECT_NEAR(Machine(t.view()).call_seconds(Sharing{1, 1}), 5e-6, 1e-15);
}

// Streaming rates measured at two call sizes: in cache, and beyond the
// last-level cache (DRAM). A product's operands stream at the fastest rate
// of a call at least their size; a working set read anew each step costs
// nothing beyond the product's own rate while it is no larger than the
// in-cache call, and reads at DRAM's rate as large as the DRAM call.
TEST(Bandwidth, AWorkingSetBeyondTheCacheReadsAtTheRateMeasuredBeyondIt) {
  TestMachine t;
  t.without = {"sum_squares", "elementwise", "bias_add"};
  t.measured = {{"sum_squares", 1, 0, 1 << 20, 4.0, 1e11}, {"sum_squares", 1, 0, 1 << 28, 4.0, 1e10},
                {"elementwise", 1, 0, 1 << 20, 4.0, 5e10}};
  Machine m(t.view());
  EXPECT_NEAR(m.bandwidth_seconds(1e6, Sharing{1, 1}), 1e6 / 1e11, 1e-15);
  EXPECT_NEAR(m.bandwidth_seconds(1e7, Sharing{1, 1}), 1e7 / 1e10, 1e-15);  // only the DRAM call is that large
  EXPECT_EQ(m.working_set_seconds(1e6, 4e6, Sharing{1, 1}), 0.0);
  EXPECT_NEAR(m.working_set_seconds(1e6, 4.0 * (1 << 28), Sharing{1, 1}), 1e6 / 1e10, 1e-15);
  EXPECT_NEAR(m.working_set_seconds(1e6, 1e10, Sharing{1, 1}), 1e6 / 1e10, 1e-15);
  const double between = m.working_set_seconds(1e6, 1.0 * (1 << 26), Sharing{1, 1});
  EXPECT_GT(between, 1e6 / 1e11);
  EXPECT_LT(between, 1e6 / 1e10);
}

TEST(SharedDevice, RanksBeyondTheMostMeasuredShareItByTimeSlicing) {
  TestMachine t;
  t.shared = true;
  t.gemm = {{1, 0, 1, 1024, 1024, 1024, 4e11}, {2, 0, 1, 1024, 1024, 1024, 2.5e11}};
  Machine m(t.view());
  const double two = m.gemm_seconds(1, 1024, 1024, 1024, Sharing{2, 2});
  EXPECT_NEAR(two, 2.0 * std::pow(1024.0, 3) / 2.5e11, 1e-12);
  EXPECT_NEAR(m.gemm_seconds(1, 1024, 1024, 1024, Sharing{8, 8}), 4 * two, 1e-12);
  EXPECT_NEAR(m.gemm_seconds(1, 1024, 1024, 1024, Sharing{1, 1}), 2.0 * std::pow(1024.0, 3) / 4e11, 1e-12);
}

// The time of one 1024^3 product at `flops_per_s`.
double cube_seconds(double flops_per_s) { return 2.0 * std::pow(1024.0, 3) / flops_per_s; }

TEST(SharedDevice, FewerRanksComputingRunAtTheirMeasuredRateAndBetweenBusyCountsLinearly) {
  TestMachine t;
  t.shared = true;
  t.gemm = {{4, 0, 1, 1024, 1024, 1024, 1e11}, {4, 1, 1, 1024, 1024, 1024, 4e11}};
  Machine m(t.view());
  auto seconds = [&](int32_t ranks, int32_t busy) { return m.gemm_seconds(1, 1024, 1024, 1024, Sharing{ranks, busy}); };
  EXPECT_NEAR(seconds(4, 4), cube_seconds(1e11), 1e-12);
  EXPECT_NEAR(seconds(4, 1), cube_seconds(4e11), 1e-12);
  // Two busy: a third of the way from one to four.
  EXPECT_NEAR(seconds(4, 2), (2 * cube_seconds(4e11) + cube_seconds(1e11)) / 3, 1e-12);
  // Eight ranks read the four-rank rates; eight busy time-slice them.
  EXPECT_NEAR(seconds(8, 2), seconds(4, 2), 1e-12);
  EXPECT_NEAR(seconds(8, 8), 2 * cube_seconds(1e11), 1e-12);
}

TEST(SharedDevice, WithoutBusyRatesFewerRanksComputingRunAtTheFullLoadRate) {
  TestMachine t;
  t.shared = true;
  t.gemm = {{4, 0, 1, 1024, 1024, 1024, 1e11}};
  Machine m(t.view());
  EXPECT_NEAR(m.gemm_seconds(1, 1024, 1024, 1024, Sharing{4, 1}), cube_seconds(1e11), 1e-12);
}

TEST(VectorOps, TakeElementsTimesBytesPerElementOverBandwidth) {
  TestMachine t;
  Machine m(t.view());
  EXPECT_DOUBLE_EQ(m.vector_seconds("softmax", 1e9, Sharing{1, 1}), 1e9 / 1e11);
}

TEST(VectorOps, BetweenMeasuredCallSizesTheRateIsInterpolatedAndOutsideTheNearestHolds) {
  TestMachine t;
  t.view();
  t.vector = {{"softmax", 1, 0, 1000, 1.0, 1e9}, {"softmax", 1, 0, 100000, 1.0, 1e11}};
  t.hw.vector = t.vector.data();
  t.hw.num_vector = t.vector.size();
  Machine m(t.hw);
  EXPECT_DOUBLE_EQ(m.vector_seconds("softmax", 10, Sharing{1, 1}), 10 / 1e9);
  EXPECT_NEAR(m.vector_seconds("softmax", 10000, Sharing{1, 1}), 10000 / 1e10, 1e-15);
  EXPECT_DOUBLE_EQ(m.vector_seconds("softmax", 1e7, Sharing{1, 1}), 1e7 / 1e11);
}

TEST(VectorOps, AnOpTheProfileLacksIsAnErrorNamingIt) {
  TestMachine t;
  t.view();
  t.vector.erase(t.vector.begin() + 6);  // no "softmax"
  t.hw.num_vector = t.vector.size();
  Machine m(t.hw);
  try {
    m.vector_seconds("softmax", 1, Sharing{1, 1});
    FAIL() << "priced an op the profile does not rate";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("hardware profile 'test' has no [[vector]] rate for op 'softmax'"));
  }
}

TEST(Collectives, AreLatencyPlusRingBytesOverBusBandwidth) {
  TestMachine t;
  Machine m(t.view());
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllReduce, 1e9, 8, MH_LINK_INTRA_NODE), 1e-5 + 1e9 * 1.75 / 1e10);
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllGather, 1e9, 8, MH_LINK_INTER_NODE), 1e-5 + 1e9 * 0.875 / 1e9);
  EXPECT_EQ(m.collective_seconds(Coll::kAllReduce, 1e9, 1, MH_LINK_INTRA_NODE), 0.0);
}

TEST(Collectives, TheExactOpAndTheNearestGroupSizeWin) {
  TestMachine t;
  t.view();
  t.collectives = {{MH_LINK_INTRA_NODE, 0, "any", 0, 1e9},
                   {MH_LINK_INTRA_NODE, 2, "all_reduce", 0, 2e9},
                   {MH_LINK_INTRA_NODE, 8, "all_reduce", 0, 8e9}};
  t.hw.collectives = t.collectives.data();
  t.hw.num_collectives = t.collectives.size();
  Machine m(t.hw);
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllReduce, 1e9, 4, MH_LINK_INTRA_NODE), 1e9 * 1.5 / 2e9);
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllReduce, 1e9, 16, MH_LINK_INTRA_NODE), 1e9 * 2 * 15.0 / 16 / 8e9);
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllGather, 1e9, 4, MH_LINK_INTRA_NODE), 1e9 * 0.75 / 1e9);
}

// An all-to-all's S is a rank's whole send buffer, of which (r - 1) / r
// leaves it: at its own rate where the profile has one (a calibrated CPU's),
// else as that much point-to-point traffic at send_recv's.
TEST(Collectives, AnAllToAllTakesItsOwnRateOrElseSendRecvsForTheBytesThatLeaveTheRank) {
  TestMachine t;
  t.view();
  t.collectives = {{MH_LINK_INTRA_NODE, 2, "send_recv", 1e-5, 1e9}, {MH_LINK_INTRA_NODE, 4, "all_to_all", 2e-5, 4e9}};
  t.hw.collectives = t.collectives.data();
  t.hw.num_collectives = t.collectives.size();
  Machine m(t.hw);
  EXPECT_DOUBLE_EQ(m.collective_seconds(Coll::kAllToAll, 1e9, 4, MH_LINK_INTRA_NODE), 2e-5 + 1e9 * 0.75 / 4e9);
  t.hw.num_collectives = 1;  // send_recv only
  Machine without(t.hw);
  EXPECT_DOUBLE_EQ(without.collective_seconds(Coll::kAllToAll, 1e9, 4, MH_LINK_INTRA_NODE), 1e-5 + 1e9 * 0.75 / 1e9);
}

TEST(Collectives, AProfileOfOneNodeCannotPriceTrafficBetweenNodes) {
  TestMachine t;
  t.view();
  t.hw.num_collectives = 1;  // intra only
  Machine m(t.hw);
  try {
    m.collective_seconds(Coll::kAllReduce, 1, 16, MH_LINK_INTER_NODE);
    FAIL() << "priced traffic between nodes";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("no [[collective]] rate for all_reduce between nodes"));
  }
}

}  // namespace
}  // namespace mh::tuner
