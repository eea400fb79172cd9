// Specification of the "megatron" tensor-parallel plan, exercised through
// the component descriptor and MH_TensorParallelApi.
#include "component_harness.hpp"
#include "plugin_module.hpp"
#include "megatron_tensor_parallel.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

using mh::testing::describe;
using mh::testing::Instance;
using mh::testing::Overrides;

constexpr const char* kSection = "parallel.tensor";

// GPT-2 small: 12 heads, hidden 768, 4h MLP, a vocabulary of 50304.
MH_ModelShape gpt2_small() {
  MH_ModelShape s{};
  s.struct_size = MH_STRUCT_SIZE(MH_ModelShape, world_size);
  s.layers = 12;
  s.hidden = 768;
  s.heads = 12;
  s.ffn_hidden = 3072;
  s.seq_len = 1024;
  s.vocab = 50304;
  s.micro_batch = 4;
  s.global_batch = 32;
  s.world_size = 8;
  return s;
}

// Every weight a model with a gated MLP lists (abi.h, MH_TensorPlanArgs).
const std::vector<const char*> kGatedWeights = {"embedding", "attention.qkv", "attention.proj",
                                                "mlp.gate",  "mlp.fc1",       "mlp.fc2"};

struct Planned {
  std::string status;
  MH_TensorPlan plan;  // its shard array is gone: read `shard`
  std::map<std::string, int32_t> shard;  // what the plan wrote, by weight name
};

Planned plan_with(const Overrides& options, const MH_ModelShape& shape = gpt2_small(),
                  const std::vector<const char*>& weights = kGatedWeights) {
  Instance<MH_TensorParallelApi> tp(mh::tensor::megatron_component(), kSection, options);
  const MH_TensorPlanArgs args{MH_STRUCT_SIZE(MH_TensorPlanArgs, num_weights), nullptr, &shape, weights.data(),
                               weights.size()};
  std::vector<int32_t> shards(weights.size(), -2);  // -2: not written
  Planned out{};
  out.plan.struct_size = sizeof(MH_TensorPlan);
  out.plan.shard = shards.data();
  out.status = describe(tp.api().plan(tp.self(), &args, &out.plan));
  out.plan.shard = nullptr;
  for (size_t i = 0; i < weights.size(); ++i) out.shard[weights[i]] = shards[i];
  return out;
}

TEST(TensorParallelPlan, DefaultIsOneRankWithNothingShardedOrCommunicated) {
  Planned p = plan_with({});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.size, 1);
  EXPECT_EQ(p.plan.sequence_parallel, 0);
  for (const auto& [name, shard] : p.shard) EXPECT_EQ(shard, MH_SHARD_NONE) << name;
  EXPECT_EQ(p.plan.enter_fwd, MH_COLL_NONE);
  EXPECT_EQ(p.plan.enter_bwd, MH_COLL_NONE);
  EXPECT_EQ(p.plan.exit_fwd, MH_COLL_NONE);
  EXPECT_EQ(p.plan.exit_bwd, MH_COLL_NONE);
  EXPECT_EQ(p.plan.reduce_norm_grads, 0);
}

TEST(TensorParallelPlan, ColumnParallelQkvGateAndFc1RowParallelProjAndFc2VocabParallelEmbedding) {
  Planned p = plan_with({{"size", int64_t{4}}});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.size, 4);
  EXPECT_EQ(p.shard, (std::map<std::string, int32_t>{{"embedding", MH_SHARD_ROWS},
                                                       {"attention.qkv", MH_SHARD_ROWS},
                                                       {"attention.proj", MH_SHARD_COLS},
                                                       {"mlp.gate", MH_SHARD_ROWS},
                                                       {"mlp.fc1", MH_SHARD_ROWS},
                                                       {"mlp.fc2", MH_SHARD_COLS}}));
}

TEST(TensorParallelPlan, WritesEachShardAtItsNamesPositionInTheHostsList) {
  Planned p = plan_with({{"size", int64_t{2}}}, gpt2_small(), {"mlp.fc2", "embedding"});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.shard, (std::map<std::string, int32_t>{{"mlp.fc2", MH_SHARD_COLS}, {"embedding", MH_SHARD_ROWS}}));
}

TEST(TensorParallelPlan, RefusesWeightsWithoutTheHostsShardArray) {
  Instance<MH_TensorParallelApi> tp(mh::tensor::megatron_component(), kSection, {});
  const MH_ModelShape shape = gpt2_small();
  const MH_TensorPlanArgs args{MH_STRUCT_SIZE(MH_TensorPlanArgs, num_weights), nullptr, &shape,
                               kGatedWeights.data(), kGatedWeights.size()};
  MH_TensorPlan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_EQ(describe(tp.api().plan(tp.self(), &args, &plan)),
            "INVALID_ARGUMENT: the plan's arguments list 6 weights without their names or the host's shard array "
            "(MH_TensorPlanArgs.weights, MH_TensorPlan.shard is NULL)");
}

TEST(TensorParallelPlan, RefusesAWeightItDoesNotKnowNamingIt) {
  EXPECT_EQ(plan_with({{"size", int64_t{2}}}, gpt2_small(), {"embedding", "mlp.router"}).status,
            "INVALID_ARGUMENT: unknown weight 'mlp.router': this tensor-parallel plan shards embedding, "
            "attention.qkv, attention.proj, mlp.gate, mlp.fc1 and mlp.fc2; use a plan that knows the model's weights");
}

TEST(TensorParallelPlan, WithoutSequenceParallelismRegionsUseMegatronFAndG) {
  Planned p = plan_with({{"size", int64_t{2}}});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.sequence_parallel, 0);
  EXPECT_EQ(p.plan.enter_fwd, MH_COLL_NONE);        // f: identity forward
  EXPECT_EQ(p.plan.enter_bwd, MH_COLL_ALL_REDUCE);  //    all-reduce backward
  EXPECT_EQ(p.plan.exit_fwd, MH_COLL_ALL_REDUCE);   // g: all-reduce forward
  EXPECT_EQ(p.plan.exit_bwd, MH_COLL_NONE);         //    identity backward
  EXPECT_EQ(p.plan.reduce_norm_grads, 0);
}

TEST(TensorParallelPlan, SequenceParallelismSplitsEachAllReduceIntoGatherAndReduceScatter) {
  Planned p = plan_with({{"size", int64_t{2}}, {"sequence_parallel", true}});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.sequence_parallel, 1);
  EXPECT_EQ(p.plan.enter_fwd, MH_COLL_ALL_GATHER);
  EXPECT_EQ(p.plan.enter_bwd, MH_COLL_REDUCE_SCATTER);
  EXPECT_EQ(p.plan.exit_fwd, MH_COLL_REDUCE_SCATTER);
  EXPECT_EQ(p.plan.exit_bwd, MH_COLL_ALL_GATHER);
}

TEST(TensorParallelPlan, SequenceParallelLayernormGradientsAreReducedOverTheGroup) {
  EXPECT_EQ(plan_with({{"size", int64_t{2}}, {"sequence_parallel", true}}).plan.reduce_norm_grads,
            1);
}

TEST(TensorParallelPlan, SequenceParallelismIsForcedOffOnOneRank) {
  MH_ModelShape odd_sequence = gpt2_small();
  odd_sequence.seq_len = 1023;
  Planned p = plan_with({{"sequence_parallel", true}}, odd_sequence);
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.sequence_parallel, 0);
  EXPECT_EQ(p.plan.reduce_norm_grads, 0);
  EXPECT_EQ(p.plan.enter_fwd, MH_COLL_NONE);
  EXPECT_EQ(p.plan.exit_fwd, MH_COLL_NONE);
}

TEST(TensorParallelPlan, RefusesASizeThatDoesNotDivideTheHeadsAndListsTheSizesThatDo) {
  MH_ModelShape shape = gpt2_small();
  shape.hidden = 960;
  shape.ffn_hidden = 3840;
  shape.vocab = 51200;
  shape.world_size = 40;
  EXPECT_EQ(plan_with({{"size", int64_t{5}}}, shape).status,
            "INVALID_ARGUMENT: parallel.tensor.size = 5 does not divide model.heads = 12; "
            "use a size that divides 12 (1, 2, 3, 4, 6, 12)");
}

TEST(TensorParallelPlan, RefusesASizeThatDoesNotDivideTheVocabularyAndSuggestsPadding) {
  MH_ModelShape shape = gpt2_small();
  shape.vocab = 50257;
  EXPECT_EQ(plan_with({{"size", int64_t{2}}}, shape).status,
            "INVALID_ARGUMENT: parallel.tensor.size = 2 does not divide model.vocab = 50257; "
            "use a size that divides 50257 (1, 29), or pad model.vocab to 50258 "
            "(the vocabulary is not padded for you)");
}

TEST(TensorParallelPlan, ChecksTheSequenceLengthOnlyWithSequenceParallelism) {
  MH_ModelShape shape = gpt2_small();
  shape.seq_len = 1001;
  EXPECT_EQ(plan_with({{"size", int64_t{2}}}, shape).status, "OK");
  EXPECT_EQ(plan_with({{"size", int64_t{2}}, {"sequence_parallel", true}}, shape).status,
            "INVALID_ARGUMENT: parallel.tensor.size = 2 does not divide model.seq_len = 1001; "
            "use a size that divides 1001 (1, 7, 11, 13, 77, 91, 143, 1001), "
            "or set parallel.tensor.sequence_parallel = false");
}

TEST(TensorParallelPlan, RefusesASizeThatDoesNotDivideTheWorld) {
  MH_ModelShape shape = gpt2_small();
  shape.world_size = 6;
  EXPECT_EQ(plan_with({{"size", int64_t{4}}}, shape).status,
            "INVALID_ARGUMENT: parallel.tensor.size = 4 does not divide the world size = 6; "
            "use a size that divides 6 (1, 2, 3, 6)");
}

TEST(TensorParallelPlan, ReportsEveryDimensionTheSizeDoesNotDivideAtOnce) {
  MH_ModelShape tiny = gpt2_small();
  tiny.heads = 4;
  tiny.hidden = 64;
  tiny.ffn_hidden = 256;
  tiny.vocab = 96;
  EXPECT_EQ(plan_with({{"size", int64_t{3}}}, tiny).status,
            "INVALID_ARGUMENT: "
            "parallel.tensor.size = 3 does not divide model.heads = 4; "
            "use a size that divides 4 (1, 2, 4)\n"
            "parallel.tensor.size = 3 does not divide model.hidden = 64; "
            "use a size that divides 64 (1, 2, 4, 8, 16, 32, 64)\n"
            "parallel.tensor.size = 3 does not divide model.ffn_hidden = 256; "
            "use a size that divides 256 (1, 2, 4, 8, 16, 32, 64, 128, 256)\n"
            "parallel.tensor.size = 3 does not divide the world size = 8; "
            "use a size that divides 8 (1, 2, 4, 8)");
}

TEST(ParallelTensorModule, DeclaresTheMegatronTensorParallelComponent) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "parallel_tensor 1.0.0 " + mh::testing::kBuiltAbi + ": tensor_parallel megatron [size, sequence_parallel]");
}

}  // namespace
