// The training cost model on a machine with round numbers: the pipeline
// schedule's slots, what each recompute policy runs again, what sequence
// parallelism changes in the collectives, and the model FLOPs of [K22].
#include "training_cost.hpp"

#include <gtest/gtest.h>

#include "test_machine.hpp"

namespace mh::tuner {
namespace {

using testing::TestMachine;

// A small GPT: 8 layers, h = 1024, 16 heads, s = 1024, V = 32768, B = 16.
Model small() { return Model{8, 1024, 16, 4096, 1024, 32768, 16}; }

StepCost step(const Layout& l, TestMachine t = {}) {
  Machine m(t.view());
  return training_step(m, small(), l, Placement::of(l, 8, false));
}

TEST(ModelFlops, AreK22Equation7) {
  // 175B of [K22] Table 3: B = 64, s = 2048, h = 12288, L = 96, V = 51200.
  const Model gpt3{96, 12288, 96, 4 * 12288, 2048, 51200, 64};
  const double B = 64, s = 2048, h = 12288, L = 96, V = 51200;
  const double eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(model_flops(gpt3) / eq7, 1.0, 1e-12);
  EXPECT_NEAR(model_flops(gpt3), 1.4109e17, 0.0001e17);  // paper-numbers.md's reproduction
}

TEST(Pipeline, StepIsMicroBatchesPlusBubbleSlotsOfTheSlowestStagePlusTheOptimizer) {
  Layout l;
  l.t = 2, l.p = 4, l.v = 2, l.b = 1;  // m = 16, bubble (p - 1) / v = 1.5 slots
  const StepCost c = step(l);
  EXPECT_DOUBLE_EQ(c.bubble_slots, 1.5);
  EXPECT_NEAR(c.step_seconds / ((16 + 1.5) * c.stage.total() + c.step_end.total()), 1.0, 1e-12);
}

TEST(Pipeline, FillAndDrainOnASharedDeviceRunAtTheRateOfTheStagesThenComputing) {
  TestMachine t;
  t.shared = true;
  t.devices_per_node = 4;
  t.vector_ranks = 4;
  t.gemm = {{4, 0, 1, 1024, 1024, 1024, 1e11}};
  Layout l;
  l.p = 4, l.b = 4;  // m = 4: of 7 slots, 3 filling and 3 draining
  const Placement w = Placement::of(l, 4, true);
  const StepCost flat = training_step(Machine(t.view()), small(), l, w);
  EXPECT_NEAR(flat.step_seconds / ((4 + 3) * flat.stage.total() + flat.step_end.total()), 1.0, 1e-12);
  t.gemm.push_back({4, 1, 1, 1024, 1024, 1024, 4e11});  // a rank computing alone runs 4x as fast
  const StepCost fast = training_step(Machine(t.view()), small(), l, w);
  EXPECT_NEAR(fast.stage.total(), flat.stage.total(), 1e-12);
  EXPECT_LT(fast.step_seconds, flat.step_seconds - 2 * (flat.stage.gemm / 4));
}

TEST(Pipeline, InterleavingShrinksTheBubbleButSendsVTimesTheMessages) {
  Layout one;
  one.p = 4, one.b = 1;
  Layout two = one;
  two.v = 2;
  const StepCost a = step(one), b = step(two);
  EXPECT_DOUBLE_EQ(b.bubble_slots, a.bubble_slots / 2);
  EXPECT_GT(b.stage.comm, a.stage.comm);
  EXPECT_LT(b.step_seconds, a.step_seconds);
}

TEST(Recompute, FullRunsEveryLayerForwardAgain) {
  Layout l;
  l.t = 4, l.recompute = Recompute::kFull, l.recompute_layers = 1;
  const StepCost c = step(l);
  EXPECT_DOUBLE_EQ(c.layer_recompute.total(), c.layer_forward.total());
}

TEST(Recompute, SelectiveRunsOnlyTheAttentionProbabilitiesAgain) {
  Layout l;
  l.t = 4, l.b = 2, l.recompute = Recompute::kSelective;
  const StepCost c = step(l);
  // g = b a / t = 8 groups of s x s scores, head size 64: the Q K^T GEMM of
  // 2 g s^2 dh FLOPs, softmax and dropout over g s^2 elements; the kept
  // context spares P V.
  const double g = 8, s = 1024, dh = 64;
  EXPECT_NEAR(c.layer_recompute.gemm, 2 * g * s * s * dh / 1e12, 1e-12);
  EXPECT_NEAR(c.layer_recompute.vector, 2 * (g * s * s) / 1e11, 1e-12);
  EXPECT_EQ(c.layer_recompute.comm, 0.0);
  EXPECT_EQ(step(Layout{l.t, 1, 1, 1, 2}).layer_recompute.total(), 0.0);
}

TEST(SequenceParallel, MovesTheAllReduceBytesAsGatherPlusScatterAtTwiceTheCollectives) {
  Layout tp;
  tp.t = 4;
  Layout sp = tp;
  sp.sp = true;
  TestMachine no_latency;
  no_latency.latency = 0;
  EXPECT_NEAR(step(sp, no_latency).layer_forward.comm, step(tp, no_latency).layer_forward.comm, 1e-15);
  TestMachine only_latency;
  only_latency.bus = 1e30;
  EXPECT_NEAR(step(sp, only_latency).layer_forward.comm, 2 * step(tp, only_latency).layer_forward.comm, 1e-15);
}

TEST(SequenceParallel, ShardsTheLayernormAndDropoutWork) {
  Layout tp;
  tp.t = 4;
  Layout sp = tp;
  sp.sp = true;
  EXPECT_LT(step(sp).layer_forward.vector, step(tp).layer_forward.vector);
  EXPECT_DOUBLE_EQ(step(sp).layer_forward.gemm, step(tp).layer_forward.gemm);
}

TEST(Placement, GroupsLargerThanANodeCrossItsLinks) {
  Layout l;
  l.t = 8, l.p = 4, l.d = 2;
  const Placement w = Placement::of(l, 8, false);
  EXPECT_EQ(w.tp_level, MH_LINK_INTRA_NODE);
  EXPECT_EQ(w.dp_level, MH_LINK_INTER_NODE);
  EXPECT_EQ(w.pp_level, MH_LINK_INTER_NODE);
  EXPECT_EQ(Placement::of(l, 8, true).sharing, 8);
  EXPECT_EQ(w.sharing, 1);
}

TEST(Parameters, PerRankAreTheShardOfTheLayersPlusTheEndsEachStageHolds) {
  Layout l;
  l.t = 2, l.p = 2;
  const Model m = small();
  const int64_t h = 1024, f = 4096, layer = 4 * h + (3 * h * h + 3 * h + h * h + f * h + f + h * f) / 2 + 2 * h;
  EXPECT_EQ(params_per_rank(m, l, 0), 4 * layer + 32768 / 2 * h + 1024 * h);
  EXPECT_EQ(params_per_rank(m, l, 1), 4 * layer + 32768 / 2 * h + 2 * h);
}

}  // namespace
}  // namespace mh::tuner
