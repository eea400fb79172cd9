// Specification of the "megatron" expert-parallel plan: ep ranks drawn from
// the data-parallel ones, experts / ep experts each, expert weights reduced
// over the remaining d / ep; sizes that do not divide are refused naming
// the key.
#include "component_harness.hpp"
#include "plugin_module.hpp"
#include "megatron_expert_parallel.hpp"

#include <gtest/gtest.h>

namespace {

using mh::testing::describe;
using mh::testing::Instance;
using mh::testing::Overrides;

struct Planned {
  std::string status;
  MH_ExpertPlan plan;
};

Planned plan_with(int64_t size, int64_t experts, int32_t data_parallel) {
  Instance<MH_ExpertParallelApi> ep(mh::expert::megatron_component(), "parallel.expert", Overrides{{"size", size}});
  const MH_ExpertPlanArgs args{MH_STRUCT_SIZE(MH_ExpertPlanArgs, data_parallel), nullptr, experts, data_parallel};
  Planned out{};
  out.plan.struct_size = sizeof(MH_ExpertPlan);
  out.status = describe(ep.api().plan(ep.self(), &args, &out.plan));
  return out;
}

TEST(ExpertParallelPlan, SplitsTheExpertsAndLeavesTheRestOfDataParallelForTheirGradients) {
  const Planned p = plan_with(2, 8, 4);
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.size, 2);
  EXPECT_EQ(p.plan.experts_per_rank, 4);
  EXPECT_EQ(p.plan.expert_data_parallel, 2);
}

TEST(ExpertParallelPlan, SizeOneKeepsEveryExpertOnEveryRank) {
  const Planned p = plan_with(1, 8, 3);
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.experts_per_rank, 8);
  EXPECT_EQ(p.plan.expert_data_parallel, 3);
  EXPECT_EQ(plan_with(1, 0, 2).status, "OK");  // a dense model
}

TEST(ExpertParallelPlan, SizeThatDoesNotDivideTheExpertsNamesTheKey) {
  EXPECT_EQ(plan_with(3, 8, 3).status,
            "INVALID_ARGUMENT: parallel.expert.size = 3 does not divide model.experts = 8; use a size that "
            "divides 8 (1, 2, 4, 8)");
}

TEST(ExpertParallelPlan, SizeThatDoesNotDivideTheDataParallelRanksNamesTheKey) {
  const Planned p = plan_with(4, 8, 2);
  EXPECT_NE(p.status.find("parallel.expert.size = 4 does not divide the data-parallel x context x tensor size = 2"), std::string::npos)
      << p.status;
}

TEST(ExpertParallelPlan, ExpertParallelismOfADenseModelIsRefused) {
  const Planned p = plan_with(2, 0, 2);
  EXPECT_NE(p.status.find("parallel.expert.size = 2 needs a mixture-of-experts model; set model.experts"),
            std::string::npos)
      << p.status;
}

TEST(ParallelExpertModule, DeclaresTheMegatronExpertParallelComponent) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "parallel_expert 1.0.0 " + mh::testing::kBuiltAbi + ": expert_parallel megatron [size]");
}

}  // namespace
