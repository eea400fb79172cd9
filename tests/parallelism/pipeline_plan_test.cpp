// Specification of the "megatron" pipeline plan: layer assignment, the
// microbatch count and the combinations it refuses.
#include "pipeline_fixture.hpp"
#include "plugin_module.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace {

using mh::testing::create_result;
using pipetest::Pipeline;
using pipetest::shape;

using Layers = std::vector<std::array<int32_t, 4>>;

std::string create_with(const mh::testing::Overrides& options) {
  return create_result(mh::pipeline::megatron_component(), pipetest::kSection, options);
}

TEST(PipelinePlan, DefaultIsOneStageHoldingEveryLayer) {
  Pipeline pipe({});
  ASSERT_EQ(pipe.plan_for(shape(12, 8, 1)), "OK");
  EXPECT_EQ(pipe.plan.size, 1);
  EXPECT_EQ(pipe.plan.virtual_stages, 1);
  EXPECT_EQ(pipe.layers(), (Layers{{0, 0, 0, 12}}));
}

TEST(PipelinePlan, SplitsTheLayersEvenlyOverTheStagesInModelOrder) {
  Pipeline pipe({{"size", int64_t{4}}});
  ASSERT_EQ(pipe.plan_for(shape(12, 8, 4)), "OK");
  EXPECT_EQ(pipe.layers(), (Layers{{0, 0, 0, 3}, {1, 0, 3, 3}, {2, 0, 6, 3}, {3, 0, 9, 3}}));
}

TEST(PipelinePlan, InterleavedChunkCOfStageSHoldsModelChunkCTimesPPlusS) {
  Pipeline pipe({{"size", int64_t{2}},
                 {"schedule", std::string("interleaved")},
                 {"virtual_stages", int64_t{2}}});
  ASSERT_EQ(pipe.plan_for(shape(8, 4, 2)), "OK");
  EXPECT_EQ(pipe.plan.virtual_stages, 2);
  EXPECT_EQ(pipe.layers(), (Layers{{0, 0, 0, 2}, {1, 0, 2, 2}, {0, 1, 4, 2}, {1, 1, 6, 2}}));
}

TEST(PipelinePlan, AnExplicitListGivesEachStageItsLayerCount) {
  Pipeline pipe({{"size", int64_t{2}}, {"layers_per_stage", std::string("3, 5")}});
  ASSERT_EQ(pipe.plan_for(shape(8, 4, 2)), "OK");
  EXPECT_EQ(pipe.layers(), (Layers{{0, 0, 0, 3}, {1, 0, 3, 5}}));
}

TEST(PipelinePlan, MicrobatchesAreTheGlobalBatchOverMicroBatchTimesDataParallel) {
  Pipeline pipe({{"size", int64_t{2}}});
  MH_ModelShape s = shape(8, 64, 16);
  s.micro_batch = 2;
  ASSERT_EQ(pipe.plan_for(s, 4), "OK");
  EXPECT_EQ(pipe.plan.microbatches, 8);
}

TEST(PipelinePlan, RefusesAGlobalBatchThatIsNotWholeMicrobatches) {
  Pipeline pipe({{"size", int64_t{2}}});
  MH_ModelShape s = shape(8, 10, 8);
  s.micro_batch = 2;
  EXPECT_EQ(pipe.plan_for(s, 4),
            "INVALID_ARGUMENT: the microbatch count m = train.global_batch / (train.micro_batch * "
            "data-parallel size) = 10 / (2 * 4) is not a whole number; make train.global_batch a "
            "multiple of 8");
}

TEST(PipelinePlan, RefusesLayersThatDoNotSplitEvenlyAndSuggestsAnUnevenList) {
  Pipeline pipe({{"size", int64_t{4}}});
  EXPECT_EQ(pipe.plan_for(shape(10, 8, 4)),
            "INVALID_ARGUMENT: model.layers = 10 does not split evenly over 4 stages "
            "(parallel.pipeline.size = 4); set parallel.pipeline.layers_per_stage for an uneven "
            "split, e.g. \"3,3,2,2\"");
}

TEST(PipelinePlan, RefusesMoreModelChunksThanLayers) {
  Pipeline pipe({{"size", int64_t{4}},
                 {"schedule", std::string("interleaved")},
                 {"virtual_stages", int64_t{2}}});
  EXPECT_EQ(pipe.plan_for(shape(6, 8, 4)),
            "INVALID_ARGUMENT: model.layers = 6 cannot fill 8 model chunks (parallel.pipeline.size "
            "* virtual_stages = 4 * 2): every model chunk needs at least one layer");
}

TEST(PipelinePlan, RefusesAnExplicitListThatDoesNotSumToTheLayers) {
  Pipeline pipe({{"size", int64_t{2}}, {"layers_per_stage", std::string("3,4")}});
  EXPECT_EQ(pipe.plan_for(shape(8, 4, 2)),
            "INVALID_ARGUMENT: parallel.pipeline.layers_per_stage = \"3,4\" sums to 7 layers but "
            "model.layers = 8");
}

TEST(PipelinePlan, RefusesInterleavingWhenMicrobatchesAreNotAMultipleOfTheStages) {
  Pipeline pipe({{"size", int64_t{4}},
                 {"schedule", std::string("interleaved")},
                 {"virtual_stages", int64_t{2}}});
  EXPECT_EQ(pipe.plan_for(shape(16, 6, 4)),
            "INVALID_ARGUMENT: the interleaved schedule needs the microbatch count m = "
            "train.global_batch / (train.micro_batch * data-parallel size) = 6 / (1 * 1) = 6 to be "
            "a multiple of parallel.pipeline.size = 4");
}

TEST(PipelinePlan, RefusesASizeThatDoesNotDivideTheWorld) {
  Pipeline pipe({{"size", int64_t{3}}});
  EXPECT_EQ(pipe.plan_for(shape(12, 8, 8)),
            "INVALID_ARGUMENT: parallel.pipeline.size = 3 does not divide the world size = 8; use "
            "a size that divides 8 (1, 2, 4, 8)");
}

TEST(PipelinePlan, ReportsEveryProblemAtOnce) {
  Pipeline pipe({{"size", int64_t{4}}});
  std::string status = pipe.plan_for(shape(3, 7, 6), 2);
  EXPECT_EQ(std::count(status.begin(), status.end(), '\n'), 2) << status;
}

TEST(PipelinePlan, RefusesVirtualStagesWithoutTheInterleavedSchedule) {
  EXPECT_EQ(create_with({{"size", int64_t{2}}, {"virtual_stages", int64_t{2}}}),
            "INVALID_ARGUMENT: parallel.pipeline.virtual_stages = 2 needs "
            "parallel.pipeline.schedule = \"interleaved\" (it is \"1f1b\")");
}

TEST(PipelinePlan, RefusesInterleavingWithOneChunkPerStage) {
  EXPECT_EQ(
      create_with({{"size", int64_t{2}}, {"schedule", std::string("interleaved")}}),
      "INVALID_ARGUMENT: parallel.pipeline.schedule = \"interleaved\" needs "
      "parallel.pipeline.virtual_stages >= 2 model chunks per stage; with one chunk per stage "
      "use \"1f1b\"");
}

TEST(PipelinePlan, RefusesInterleavingOnOneStage) {
  EXPECT_EQ(create_with({{"schedule", std::string("interleaved")}, {"virtual_stages", int64_t{2}}}),
            "INVALID_ARGUMENT: parallel.pipeline.schedule = \"interleaved\" needs "
            "parallel.pipeline.size >= 2 stages");
}

TEST(PipelinePlan, RefusesAnExplicitListWithoutOneEntryPerStage) {
  EXPECT_EQ(create_with({{"size", int64_t{4}}, {"layers_per_stage", std::string("3,5")}}),
            "INVALID_ARGUMENT: parallel.pipeline.layers_per_stage = \"3,5\" lists 2 entries but "
            "there are 4 stages (parallel.pipeline.size = 4); give one per stage");
}

TEST(PipelinePlan, RefusesAnExplicitListEntryThatIsNotALayerCount) {
  EXPECT_EQ(
      create_with({{"size", int64_t{2}}, {"layers_per_stage", std::string("3,x")}}),
      "INVALID_ARGUMENT: parallel.pipeline.layers_per_stage = \"3,x\": \"x\" is not a positive "
      "whole number of layers");
  EXPECT_EQ(
      create_with({{"size", int64_t{2}}, {"layers_per_stage", std::string("3,0")}}),
      "INVALID_ARGUMENT: parallel.pipeline.layers_per_stage = \"3,0\": \"0\" is not a positive "
      "whole number of layers");
}

TEST(PipelinePlan, ScheduleBeforeAnyPlanIsACallerBug) {
  Pipeline pipe({});
  const MH_PipeAction* actions = nullptr;
  size_t count = 0;
  EXPECT_EQ(mh::testing::describe(
                pipe.instance.api().schedule(pipe.instance.self(), 0, &actions, &count)),
            "INTERNAL: schedule(stage) called before a successful plan");
}

TEST(PipelinePlan, RefusesAStageOutsideThePipeline) {
  Pipeline pipe({{"size", int64_t{2}}});
  ASSERT_EQ(pipe.plan_for(shape(4, 4, 2)), "OK");
  const MH_PipeAction* actions = nullptr;
  size_t count = 0;
  EXPECT_EQ(mh::testing::describe(
                pipe.instance.api().schedule(pipe.instance.self(), 2, &actions, &count)),
            "INVALID_ARGUMENT: stage 2 is outside the 2 pipeline stages");
}

TEST(ParallelPipelineModule, DeclaresTheMegatronPipelineParallelComponent) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "parallel_pipeline 1.0.0 " + mh::testing::kBuiltAbi + ": pipeline_parallel megatron "
            "[size, schedule, virtual_stages, layers_per_stage]");
}

}  // namespace
