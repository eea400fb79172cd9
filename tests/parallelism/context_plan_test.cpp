// Specification of the "megatron" context-parallel plan, exercised through
// the component descriptor and MH_ContextParallelApi.
#include "component_harness.hpp"
#include "plugin_module.hpp"
#include "megatron_context_parallel.hpp"

#include <gtest/gtest.h>

namespace {

using mh::testing::describe;
using mh::testing::Instance;
using mh::testing::Overrides;

MH_ModelShape long_context(int64_t seq_len = 8192, int32_t world = 8) {
  MH_ModelShape s{};
  s.struct_size = sizeof(MH_ModelShape);
  s.layers = 32;
  s.hidden = 4096;
  s.heads = 32;
  s.ffn_hidden = 11008;
  s.seq_len = seq_len;
  s.vocab = 32000;
  s.micro_batch = 1;
  s.global_batch = 16;
  s.world_size = world;
  return s;
}

struct Planned {
  std::string status;
  MH_ContextPlan plan;
};

Planned plan_with(const Overrides& options, const MH_ModelShape& shape = long_context()) {
  Instance<MH_ContextParallelApi> cp(mh::context::megatron_component(), "parallel.context", options);
  const MH_ContextPlanArgs args{MH_STRUCT_SIZE(MH_ContextPlanArgs, shape), nullptr, &shape};
  Planned out{};
  out.plan.struct_size = sizeof(MH_ContextPlan);
  out.status = describe(cp.api().plan(cp.self(), &args, &out.plan));
  return out;
}

TEST(ContextParallelPlan, DefaultIsOneRankWithNothingToBalance) {
  Planned p = plan_with({});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.size, 1);
  EXPECT_EQ(p.plan.load_balance, 0);
}

TEST(ContextParallelPlan, SplitsIntoLoadBalancedChunksExchangedByAllGather) {
  Planned p = plan_with({{"size", int64_t{4}}});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.size, 4);
  EXPECT_EQ(p.plan.comm, MH_CP_ALL_GATHER);
  EXPECT_EQ(p.plan.load_balance, 1);
}

TEST(ContextParallelPlan, RefusesASequenceThatTwiceTheSizeDoesNotDivide) {
  EXPECT_EQ(plan_with({{"size", int64_t{4}}}, long_context(8196)).status,
            "INVALID_ARGUMENT: parallel.context.size = 4 cuts model.seq_len = 8196 into 8 chunks (2 per rank, "
            "load-balanced), which does not divide it; use a seq_len that is a multiple of 8, or a size whose "
            "2 x size divides 8196");
}

TEST(ContextParallelPlan, WithoutBalancingTheSizeAloneMustDivideTheSequence) {
  EXPECT_EQ(plan_with({{"size", int64_t{4}}, {"load_balance", false}}, long_context(8196)).status, "OK");
}

TEST(ContextParallelPlan, RefusesASizeThatDoesNotDivideTheWorld) {
  EXPECT_EQ(plan_with({{"size", int64_t{3}}}, long_context(8196, 8)).status,
            "INVALID_ARGUMENT: parallel.context.size = 3 does not divide the world size = 8; use a size that "
            "divides 8 (1, 2, 4, 8)");
}

TEST(ContextParallelPlan, TheRingIsPlannedForAnyHeads) {
  MH_ModelShape mqa = long_context();
  mqa.kv_heads = 1;
  Planned p = plan_with({{"size", int64_t{4}}, {"comm_type", std::string("p2p")}}, mqa);
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.comm, MH_CP_P2P);
}

TEST(ContextParallelPlan, AllToAllIsPlannedWhenTheSizeDividesTheKeyValueHeads) {
  Planned p = plan_with({{"size", int64_t{4}}, {"comm_type", std::string("a2a")}});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.comm, MH_CP_A2A);
}

TEST(ContextParallelPlan, AllToAllRefusesASizeThatDoesNotDivideTheKeyValueHeads) {
  MH_ModelShape gqa = long_context();
  gqa.kv_heads = 2;
  EXPECT_EQ(plan_with({{"size", int64_t{4}}, {"comm_type", std::string("a2a")}}, gqa).status,
            "INVALID_ARGUMENT: parallel.context.comm_type = \"a2a\" splits the key/value heads over "
            "parallel.context.size = 4, which does not divide model.kv_heads = 2; use comm_type = \"all_gather\", "
            "or a size that divides 2 (1, 2)");
}

TEST(ContextParallelPlan, RefusesArgumentsWithoutAModelShape) {
  Instance<MH_ContextParallelApi> cp(mh::context::megatron_component(), "parallel.context", {});
  const MH_ContextPlanArgs args{MH_STRUCT_SIZE(MH_ContextPlanArgs, shape), nullptr, nullptr};
  MH_ContextPlan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_EQ(describe(cp.api().plan(cp.self(), &args, &plan)),
            "INVALID_ARGUMENT: the plan's arguments name no model shape (MH_ContextPlanArgs.shape is NULL)");
}

TEST(ContextParallelPlan, ModuleExportsTheComponentWithItsOptions) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "parallel_context 1.0.0 " + mh::testing::kBuiltAbi +
                ": context_parallel megatron [size, comm_type, load_balance]");
}

}  // namespace
