// The training cost model on a machine with round numbers: the pipeline
// schedule's slots, what each recompute policy runs again, what sequence
// parallelism changes in the collectives, and the model FLOPs of [K22].
#include "training_cost.hpp"

#include <gtest/gtest.h>
#include <megahost/model_flops.hpp>

#include <algorithm>

#include "keep_tables.hpp"
#include "recompute_cost.hpp"
#include "test_machine.hpp"

namespace mh::tuner {
namespace {

using testing::builtin_keep;
using testing::TestMachine;

// A small GPT: 8 layers, h = 1024, 16 heads, s = 1024, V = 32768, B = 16.
Model small() { return Model{8, 1024, 16, 4096, 1024, 32768, 16}; }

StepCost step(const Layout& l, TestMachine t = {}) {
  Machine m(t.view());
  const KeepTable keep = builtin_keep(l.recompute, small().layers, l.layers_per_chunk(small()), std::max(1, l.recompute_layers));
  return training_step(m, small(), l, Placement::of(l, 8, false), keep);
}

TEST(ModelFlops, AreK22Equation7) {
  // 175B of [K22] Table 3: B = 64, s = 2048, h = 12288, L = 96, V = 51200.
  const Model gpt3{96, 12288, 96, 4 * 12288, 2048, 51200, 64};
  const double B = 64, s = 2048, h = 12288, L = 96, V = 51200;
  const double eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(model_flops(gpt3) / eq7, 1.0, 1e-12);
  EXPECT_NEAR(model_flops(gpt3), 1.4109e17, 0.0001e17);  // paper-numbers.md's reproduction
}

// Qwen3-0.6B's shape: 16 heads of 128 over h = 1024, 8 key/value heads.
TEST(ModelFlops, CountTheHeadSizeWhereItIsNotHiddenOverHeads) {
  const double B = 8, s = 4096, h = 1024, a = 16, k = 8, D = 128, f = 3072, L = 28, V = 151936;
  const mh::ModelFlopsShape qwen3{28, 1024, 16, 8, 3072, 4096, 151936, true, 128};
  const double layer = 2 * B * s * ((a + 2 * k) * D * h + a * D * h + 3 * h * f) + 4 * B * s * s * a * D;
  EXPECT_NEAR(mh::model_flops(qwen3, 8) / (3 * (L * layer + 2 * B * s * h * V)), 1.0, 1e-12);
  // 0 means h / a, which is what it says for a model whose head size is h / a.
  mh::ModelFlopsShape derived = qwen3, explicit_size = qwen3;
  derived.head_dim = 0;
  explicit_size.head_dim = 1024 / 16;
  EXPECT_EQ(mh::model_flops(derived, 8), mh::model_flops(explicit_size, 8));
}

// A 1.8 host's head_dim sets QKV's and the output projection's widths; a
// 1.7 host's shorter struct means hidden / heads.
TEST(Model, HeadDimFromTheShapeSetsTheAttentionWidths) {
  MH_ModelShape shape{sizeof(MH_ModelShape), 8, 1024, 16, 4096, 1024, 32768, 2, 16, 1, 1, 1, 8, 1, 128};
  const Model m = Model::from(shape);
  EXPECT_EQ(m.qkv(), (16 + 2 * 8) * 128);
  EXPECT_EQ(m.attention_width(), 16 * 128);
  const Layout one;
  EXPECT_EQ(params_per_rank(m, one, 0) - params_per_rank(Model::from([&] {
                                                          MH_ModelShape older = shape;
                                                          older.struct_size = MH_STRUCT_SIZE(MH_ModelShape, untied_output);
                                                          return older;
                                                        }()), one, 0),
            8 * ((16 + 2 * 8) * (128 - 64) * (1024 + 1) + 1024 * 16 * (128 - 64)));  // QKV and its bias, proj
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
  const KeepTable keep = builtin_keep("none", small().layers, 2, 1);
  const StepCost flat = training_step(Machine(t.view()), small(), l, w, keep);
  EXPECT_NEAR(flat.step_seconds / ((4 + 3) * flat.stage.total() + flat.step_end.total()), 1.0, 1e-12);
  t.gemm.push_back({4, 1, 1, 1024, 1024, 1024, 4e11});  // a rank computing alone runs 4x as fast
  const StepCost fast = training_step(Machine(t.view()), small(), l, w, keep);
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
  l.t = 4, l.recompute = "full", l.recompute_layers = 1;
  const StepCost c = step(l);
  EXPECT_DOUBLE_EQ(c.layer_recompute.total(), c.layer_forward.total());
}

TEST(Recompute, SelectiveRunsOnlyTheAttentionProbabilitiesAgain) {
  Layout l;
  l.t = 4, l.b = 2, l.recompute = "selective";
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

// A policy is priced from its keep table, not its name: one that drops
// only FC1's output and its activation (a third party's) runs those again,
// more than none and less than selective's attention core or full's layer.
TEST(Recompute, AnyKeepTableIsPricedAsTheForwardOpsOfWhatItDrops) {
  Layout l;
  l.t = 4, l.b = 2;
  TestMachine t;
  Machine m(t.view());
  const Model model = small();
  const Placement w = Placement::of(l, 8, false);
  KeepTable mlp = builtin_keep("none", model.layers, model.layers, 1);
  for (LayerKeep& k : mlp) k[kActFc1] = k[kActGelu] = false;
  auto recompute = [&](const KeepTable& keep) { return training_step(m, model, l, w, keep).layer_recompute; };
  const Seconds none = recompute(builtin_keep("none", model.layers, model.layers, 1));
  const Seconds only_mlp = recompute(mlp);
  const Seconds full = recompute(builtin_keep("full", model.layers, model.layers, 1));
  EXPECT_EQ(none.total(), 0.0);
  // FC1 is a GEMM of 2 n f/t h FLOPs (n = s b = 2048), then its GeLU.
  EXPECT_NEAR(only_mlp.gemm, 2.0 * 2048 * 1024 * 1024 / 1e12, 1e-12);
  EXPECT_GT(only_mlp.vector, 0.0);
  EXPECT_LT(only_mlp.total(), full.total());
}

// Dropping a layer's input rebuilds it from the previous layer, as the
// engine does: the previous layer's activations first (its MLP output
// projection only to regenerate its dropout mask), then that projection
// again for the output. So full recompute in groups of two runs one more
// FC2 branch per group than groups of one (each layer forward once).
TEST(Recompute, ADroppedLayerInputIsRebuiltFromThePreviousLayer) {
  Layout one;
  one.recompute = "full", one.recompute_layers = 1;
  Layout two = one;
  two.recompute_layers = 2;
  EXPECT_NEAR(step(one).layer_recompute.total(), step(one).layer_forward.total(), 1e-15);
  // FC2: 2 n h f FLOPs (n = s b = 1024, f = 4096) once per two layers.
  EXPECT_NEAR(step(two).layer_recompute.gemm - step(one).layer_recompute.gemm, 2.0 * 1024 * 1024 * 4096 / 1e12 / 2,
              1e-12);
}

// Megatron's distributed optimizer at d = 8: the reduce-scatter and the
// all-gather move what the all-reduce moved, AdamW runs on 1/8 of the
// parameters; overlapped, the gather hides behind the next forward.
TEST(DistributedOptimizer, UpdatesAnEighthAndOverlapHidesItsGather) {
  Layout plain;
  plain.d = 8;
  Layout dist = plain;
  dist.distributed_optimizer = true;
  Layout overlapped = dist;
  overlapped.overlap_param_gather = true;
  TestMachine t;
  const StepCost a = step(plain, t), b = step(dist, t), c = step(overlapped, t);
  // Zeroing the gradients, then the norm, AdamW and (distributed) the
  // rounding into the parameters, each at one rate per element here.
  EXPECT_NEAR(b.step_end.vector / a.step_end.vector, (1 + 3.0 / 8) / 3, 1e-9);
  EXPECT_LT(c.step_end.comm, b.step_end.comm);
  EXPECT_LT(c.step_seconds, b.step_seconds);
  EXPECT_EQ(c.step_end.vector, b.step_end.vector);
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

Layout context(int32_t cp, const char* comm) {
  Layout l;
  l.cp = cp, l.d = 8 / cp, l.cp_comm = comm;
  return l;
}

TEST(ContextParallel, EachRankComputesACpthOfTheRowsAndOfTheCausalScores) {
  TestMachine free_links;
  free_links.latency = 0, free_links.bus = 1e30;
  const double one = step(context(1, ""), free_links).layer_forward.gemm;
  for (const char* comm : {"all_gather", "p2p", "a2a"}) {
    // At least half: the weights are streamed whole by each rank.
    const double ratio = step(context(2, comm), free_links).layer_forward.gemm / one;
    EXPECT_GE(ratio, 0.5 - 1e-9) << comm;
    EXPECT_LT(ratio, 0.6) << comm;
  }
}

// Counted in latencies: all-gather and reduce-scatter once; the ring's
// cp - 1 steps forward and its 2 cp - 1 back; Ulysses' four all-to-alls
// each way.
TEST(ContextParallel, PricesEachCommTypesExchangesPerLayer) {
  TestMachine only_latency;
  only_latency.bus = 1e30;
  const double lat = only_latency.latency;
  const std::vector<std::pair<const char*, std::pair<double, double>>> expected{
      {"all_gather", {1, 1}}, {"p2p", {3, 7}}, {"a2a", {4, 4}}};
  for (const auto& [comm, counts] : expected) {
    const StepCost c = step(context(4, comm), only_latency);
    EXPECT_NEAR(c.layer_forward.comm, counts.first * lat, 1e-15) << comm;
    EXPECT_NEAR(c.layer_backward.comm, counts.second * lat, 1e-15) << comm;
  }
}

// A mixture of 8 experts, 2 per token, each 1024 wide.
Model mixture() {
  Model m = small();
  m.experts = 8, m.router_topk = 2, m.moe_ffn = 1024, m.ffn = 2048, m.gated = true;
  return m;
}

// The rank's s b k rows of h, (ep - 1) / ep of them to other ranks, at the
// link's bandwidth: dispatch and combine forward, their conjugates back.
TEST(ExpertParallel, DispatchAndCombineAreAllToAllsOfTheRoutedRows) {
  TestMachine no_latency;
  no_latency.latency = 0;
  Machine m(no_latency.view());
  Layout l;
  l.d = 8, l.ep = 4;
  const Model moe = mixture();
  const StepCost c = training_step(m, moe, l, Placement::of(l, 8, false), KeepTable(size_t(moe.layers)));
  const double rows = 1024.0 * 2, bytes = rows * 1024 * 2 /* bf16 */;
  EXPECT_NEAR(c.layer_forward.comm, 2 * bytes * 3 / 4 / no_latency.bus, 1e-12);
  EXPECT_NEAR(c.layer_backward.comm, 2 * bytes * 3 / 4 / no_latency.bus, 1e-12);
}

// Under tensor and sequence parallelism the mixture is no tensor-parallel
// region: only attention's all-gather and reduce-scatter stay in a layer's
// forward, where a dense MLP adds its own pair.
TEST(ExpertParallel, AMixtureUnderTensorParallelismHasNoTensorCollectivesAroundItsExperts) {
  TestMachine no_latency;
  no_latency.latency = 0;
  Machine m(no_latency.view());
  Layout l;
  l.t = 2, l.sp = true, l.d = 4;
  Model dense = mixture();
  dense.experts = 0;
  const Model moe = mixture();
  auto forward_comm = [&](const Model& model) {
    return training_step(m, model, l, Placement::of(l, 8, false), KeepTable(size_t(model.layers))).layer_forward.comm;
  };
  EXPECT_GT(forward_comm(dense), 0);
  EXPECT_NEAR(forward_comm(moe), forward_comm(dense) / 2, 1e-12);
}

// Each rank holds E / ep experts: fewer weights to update.
TEST(ExpertParallel, ShrinksTheExpertsEachRankUpdates) {
  Machine m(TestMachine{}.view());
  Layout one, four;
  one.d = four.d = 8;
  four.ep = 4;
  const Model moe = mixture();
  EXPECT_EQ(routed_expert_params(moe, one), 4 * routed_expert_params(moe, four));
  auto end = [&](const Layout& l) {
    return training_step(m, moe, l, Placement::of(l, 8, false), KeepTable(size_t(moe.layers))).step_end.vector;
  };
  EXPECT_LT(end(four), end(one));
}

TEST(Placement, TheContextAndExpertGroupsSitBetweenTensorAndData) {
  Layout l;
  l.t = 2, l.cp = 4, l.d = 4, l.ep = 2;
  const Placement w = Placement::of(l, 8, false);
  EXPECT_EQ(w.cp_level, MH_LINK_INTRA_NODE);  // t cp = 8
  // The expert group is ep consecutive ranks of the stage's tensor, context
  // and data ranks (tensor first, the experts whole on each): ep = 2.
  EXPECT_EQ(w.ep_level, MH_LINK_INTRA_NODE);
  EXPECT_EQ(w.dp_level, MH_LINK_INTER_NODE);
  l.ep = 8;
  EXPECT_EQ(Placement::of(l, 8, false).ep_level, MH_LINK_INTRA_NODE);
  l.ep = 16;
  EXPECT_EQ(Placement::of(l, 8, false).ep_level, MH_LINK_INTER_NODE);
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
