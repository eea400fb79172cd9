// The [tuner] search lists: "auto" and comma lists, expanded into every
// layout with the reasons the ones that cannot run are refused.
#include "search_space.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace mh::tuner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SearchLists lists() {
  return SearchLists{"auto", "auto", "1", "auto", "auto", "auto", "auto", "1", "false", "false"};
}

// What the host's registry holds: the built-in policies and a third party's.
const std::vector<std::string> kPolicies{"full", "mlp_only", "none", "selective"};

std::vector<Proposal> proposals(const SearchLists& l, int32_t devices) {
  return training_proposals(l, Model{8, 768, 12, 3072, 512, 50304, 8}, devices, kPolicies);
}

// 12 heads, 8 layers, global batch 8.
Model model() { return Model{8, 768, 12, 3072, 512, 50304, 8}; }

std::vector<std::string> runnable(const std::vector<Proposal>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps)
    if (p.problems.empty())
      out.push_back(std::to_string(p.layout.t) + "x" + std::to_string(p.layout.p) + "x" + std::to_string(p.layout.d));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TEST(SearchLists, AutoSizesDivideWhatTheySplitAndTheDevices) {
  // t divides 12 heads and 8 devices: 1, 2, 4; p divides 8 layers and 8 / t.
  EXPECT_THAT(runnable(proposals(lists(), 8)),
              ElementsAre("1x1x8", "1x2x4", "1x4x2", "1x8x1", "2x1x4", "2x2x2", "2x4x1", "4x1x2", "4x2x1"));
}

TEST(SearchLists, SequenceParallelIsNeverProposedAtOneTensorRank) {
  for (const auto& p : proposals(lists(), 8))
    if (p.layout.t == 1) {
      EXPECT_FALSE(p.layout.sp);
    }
}

TEST(SearchLists, AutoRecomputeIsEveryRegisteredPolicyFullPerGroupSizeTheOthersOnce) {
  SearchLists l = lists();
  l.tensor = "1", l.pipeline = "1", l.micro_batch = "1", l.recompute_layers = "1,2";
  std::vector<std::string> got;
  for (const auto& p : proposals(l, 8))
    got.push_back(p.layout.recompute + "/" + std::to_string(p.layout.recompute_layers));
  EXPECT_THAT(got, ElementsAre("full/1", "full/2", "mlp_only/0", "none/0", "selective/0"));
}

TEST(SearchLists, ARecomputePolicyTheHostDoesNotHoldIsRefusedNamingThoseItDoes) {
  SearchLists l = lists();
  l.recompute = "none,partial";
  try {
    proposals(l, 8);
    FAIL() << "accepted 'partial'";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("tuner.recompute: 'partial' is not a registered recompute policy; use full, "
                                    "mlp_only, none, selective"));
  }
}

TEST(SearchLists, AutoRecomputeNeedsTheHostsList) {
  EXPECT_THROW(training_proposals(lists(), model(), 8, {}), std::exception);
  SearchLists named = lists();
  named.recompute = "selective";
  EXPECT_FALSE(training_proposals(named, model(), 8, {}).empty());
}

// auto: both optimizers where d > 1, and the overlapped gather only with
// the distributed one.
TEST(SearchLists, TheDistributedOptimizerAndItsOverlapAreSearchedOnlyWhereDataParallel) {
  SearchLists l = lists();
  l.tensor = "1,8", l.pipeline = "1", l.micro_batch = "1", l.recompute = "none", l.sequence_parallel = "false";
  l.distributed_optimizer = "auto", l.overlap_param_gather = "auto";
  std::vector<std::string> got;
  for (const auto& p : proposals(l, 8))
    got.push_back("d=" + std::to_string(p.layout.d) + (p.layout.distributed_optimizer ? " dist" : "") +
                  (p.layout.overlap_param_gather ? "+overlap" : ""));
  EXPECT_THAT(got, ElementsAre("d=8 dist+overlap", "d=8 dist", "d=8", "d=1"));
}

// Context and expert parallelism, one rank each of the other splits.
SearchLists context_expert_lists(const char* context, const char* comm, const char* expert) {
  SearchLists l = lists();
  l.tensor = "1", l.pipeline = "1", l.sequence_parallel = "false", l.micro_batch = "1", l.recompute = "none";
  l.context = context, l.context_comm = comm, l.expert = expert;
  return l;
}

// A mixture of 8 experts, 2 routed per token.
Model moe() {
  Model m = model();
  m.experts = 8, m.router_topk = 2, m.moe_ffn = 768;
  return m;
}

std::vector<std::string> problems_of(const std::vector<Proposal>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps)
    for (const auto& why : p.problems) out.push_back(why);
  return out;
}

TEST(SearchLists, ContextParallelismTakesTheDevicesBeforeDataAndTriesEachCommType) {
  std::vector<std::string> got;
  for (const auto& p : training_proposals(context_expert_lists("1,2,4", "all_gather,a2a", "1"), model(), 8, kPolicies))
    if (p.problems.empty())
      got.push_back("cp=" + std::to_string(p.layout.cp) + " d=" + std::to_string(p.layout.d) + " " + p.layout.cp_comm);
  EXPECT_THAT(got, ElementsAre("cp=1 d=8 ", "cp=2 d=4 all_gather", "cp=2 d=4 a2a", "cp=4 d=2 all_gather",
                               "cp=4 d=2 a2a"));
}

TEST(SearchLists, AutoCommTypesTryTheRingOnlyWithTheFlashCore) {
  Model flash = model();
  flash.flash = true;
  std::vector<std::string> plain, ring;
  for (const auto& p : training_proposals(context_expert_lists("2", "auto", "1"), model(), 8, kPolicies))
    plain.push_back(p.layout.cp_comm);
  for (const auto& p : training_proposals(context_expert_lists("2", "auto", "1"), flash, 8, kPolicies))
    ring.push_back(p.layout.cp_comm);
  EXPECT_THAT(plain, ElementsAre("all_gather", "a2a"));
  EXPECT_THAT(ring, ElementsAre("all_gather", "p2p", "a2a"));
}

// What the engine refuses is never proposed: each is skipped with its reason.
TEST(SearchLists, ContextLayoutsTheEngineRefusesAreSkippedWithTheirReasons) {
  Model m = model();
  m.seq = 24;  // 2 * cp = 16 does not divide it
  EXPECT_THAT(problems_of(training_proposals(context_expert_lists("8", "p2p,a2a", "1"), m, 8, kPolicies)),
              ElementsAre("cp = 8 cuts seq_len = 24 into 16 chunks (2 per rank), which do not divide it",
                          "p2p: ring attention needs model.attention_backend = \"flash\"",
                          "cp = 8 cuts seq_len = 24 into 16 chunks (2 per rank), which do not divide it",
                          "a2a: cp = 8 does not divide each tensor rank's 12 key/value heads"));
}

TEST(SearchLists, ExpertParallelismDividesTheExpertsAndTheDataRanksOfAMixtureOnly) {
  std::vector<std::string> got;
  for (const auto& p : training_proposals(context_expert_lists("1", "auto", "auto"), moe(), 8, kPolicies))
    if (p.problems.empty()) got.push_back("ep=" + std::to_string(p.layout.ep));
  EXPECT_THAT(got, ElementsAre("ep=1", "ep=2", "ep=4", "ep=8"));
  EXPECT_THAT(problems_of(training_proposals(context_expert_lists("1", "auto", "2"), model(), 8, kPolicies)),
              ElementsAre("ep = 2 needs a mixture of experts (model.experts = 0)"));
  SearchLists l = context_expert_lists("1", "auto", "3");
  l.data = "4";
  EXPECT_THAT(problems_of(training_proposals(l, moe(), 4, kPolicies)),
              ElementsAre("ep = 3 does not divide the 8 experts", "ep = 3 does not divide d*cp*t = 4*1*1 = 4"));
}

TEST(SearchLists, AMixtureUnderTensorParallelismNeedsSequenceParallelism) {
  SearchLists l = context_expert_lists("2", "all_gather", "1");
  l.tensor = "2";
  EXPECT_THAT(problems_of(training_proposals(l, moe(), 8, kPolicies)),
              ElementsAre("t = 2 without sequence parallelism: the mixture of experts needs it"));
  l.sequence_parallel = "true";
  EXPECT_THAT(problems_of(training_proposals(l, moe(), 8, kPolicies)), ElementsAre());
}

// With tensor parallelism the experts are whole on each tensor rank, so the
// expert group is drawn from the data, context and tensor ranks: ep divides
// d cp t.
TEST(SearchLists, AMixtureUnderTensorParallelismDrawsItsExpertRanksFromTheTensorRanksToo) {
  SearchLists l = context_expert_lists("1", "auto", "auto");
  l.tensor = "2", l.sequence_parallel = "true";
  std::vector<std::string> got;
  for (const auto& p : training_proposals(l, moe(), 4, kPolicies))
    if (p.problems.empty()) got.push_back("d=" + std::to_string(p.layout.d) + " ep=" + std::to_string(p.layout.ep));
  EXPECT_THAT(got, ElementsAre("d=2 ep=1", "d=2 ep=2", "d=2 ep=4"));
  l.expert = "8";
  EXPECT_THAT(problems_of(training_proposals(l, moe(), 4, kPolicies)),
              ElementsAre("ep = 8 does not divide d*cp*t = 2*1*2 = 4"));
}

// Under context parallelism the expert group is drawn from the replicas and
// their context ranks (the engine's data group): ep divides d cp (t = 1).
TEST(SearchLists, AMixtureUnderContextParallelismDrawsItsExpertRanksFromDataAndContextRanks) {
  std::vector<std::string> got;
  for (const auto& p : training_proposals(context_expert_lists("2", "all_gather", "auto"), moe(), 8, kPolicies))
    if (p.problems.empty()) got.push_back("d=" + std::to_string(p.layout.d) + " ep=" + std::to_string(p.layout.ep));
  EXPECT_THAT(got, ElementsAre("d=4 ep=1", "d=4 ep=2", "d=4 ep=4", "d=4 ep=8"));
  SearchLists l = context_expert_lists("2", "all_gather", "8");
  l.data = "2";
  EXPECT_THAT(problems_of(training_proposals(l, moe(), 4, kPolicies)),
              ElementsAre("ep = 8 does not divide d*cp*t = 2*2*1 = 4"));
}

TEST(SearchLists, EverySizeThatDoesNotDivideIsNamedWithWhatItFailsToDivide) {
  SearchLists l = lists();
  l.tensor = "5", l.pipeline = "3", l.data = "1", l.sequence_parallel = "true", l.micro_batch = "3", l.recompute = "none";
  const std::vector<Proposal> ps = proposals(l, 8);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_THAT(ps[0].problems, ElementsAre("t*p*d = 5*3*1 = 15 is not the 8 devices of the cluster",
                                          "t = 5 does not divide the 12 heads",
                                          "sequence parallelism: t = 5 does not divide seq_len = 512",
                                          "p*v = 3 does not divide the 8 layers",
                                          "b*d = 3 does not divide the global batch 8"));
}

TEST(SearchLists, InterleavingNeedsTwoStagesAndMicroBatchesInMultiplesOfThem) {
  SearchLists l = lists();
  l.tensor = "1", l.pipeline = "1,4", l.virtual_stages = "2", l.data = "1", l.micro_batch = "4", l.recompute = "none";
  const std::vector<Proposal> ps = proposals(l, 4);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_THAT(ps[0].problems, ElementsAre(HasSubstr("is not the 4 devices"), "v = 2 virtual stages need p >= 2"));
  EXPECT_THAT(ps[1].problems, ElementsAre("interleaving needs the 2 micro-batches to be a multiple of p = 4"));
}

TEST(SearchLists, AnEntryThatIsNotAWholeNumberIsRefusedNamingTheKey) {
  SearchLists l = lists();
  l.pipeline = "1,two";
  try {
    proposals(l, 8);
    FAIL() << "accepted 'two'";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("tuner.pipeline: 'two' is not a positive whole number"));
  }
}

TEST(SearchLists, InferenceTriesEveryBatchOnEveryTensorAndPipelineSplitWithoutDataParallelism) {
  SearchLists l = lists();
  l.tensor = "1,2", l.pipeline = "1,2";
  const std::vector<Proposal> ps = inference_proposals(l, "1,8", model(), 4);
  ASSERT_EQ(ps.size(), 8u);
  for (const Proposal& p : ps) {
    EXPECT_EQ(p.layout.d, 1);
    EXPECT_TRUE(p.problems.empty()) << p.layout.t << "x" << p.layout.p;  // t * p of 1, 2 or 4 ranks
  }
  EXPECT_EQ(ps[7].layout.t, 2);
  EXPECT_EQ(ps[7].layout.p, 2);
  EXPECT_EQ(ps[7].layout.b, 8);
}

// Generation has no sequence parallelism: each tensor rank runs the whole
// mixture on every row, which the engine does.
TEST(SearchLists, InferenceSplitsAMixtureOverTensorRanksWithoutSequenceParallelism) {
  SearchLists l = lists();
  l.tensor = "2", l.pipeline = "1";
  const std::vector<Proposal> ps = inference_proposals(l, "1", moe(), 2);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_THAT(ps[0].problems, ElementsAre());
}

TEST(SearchLists, InferenceRefusesMoreRanksThanTheDevices) {
  SearchLists l = lists();
  l.tensor = "4", l.pipeline = "2";
  const std::vector<Proposal> ps = inference_proposals(l, "1", model(), 4);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_THAT(ps[0].problems, ElementsAre("t*p = 8 is more than the 4 devices of the cluster"));
}

}  // namespace
}  // namespace mh::tuner
