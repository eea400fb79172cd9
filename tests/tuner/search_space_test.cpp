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

SearchLists lists() { return SearchLists{"auto", "auto", "1", "auto", "auto", "auto", "auto", "1"}; }

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
  EXPECT_THAT(runnable(training_proposals(lists(), model(), 8)),
              ElementsAre("1x1x8", "1x2x4", "1x4x2", "1x8x1", "2x1x4", "2x2x2", "2x4x1", "4x1x2", "4x2x1"));
}

TEST(SearchLists, SequenceParallelIsNeverProposedAtOneTensorRank) {
  for (const auto& p : training_proposals(lists(), model(), 8))
    if (p.layout.t == 1) {
      EXPECT_FALSE(p.layout.sp);
    }
}

TEST(SearchLists, FullRecomputeIsProposedPerGroupSizeTheOthersOnce) {
  SearchLists l = lists();
  l.tensor = "1", l.pipeline = "1", l.micro_batch = "1", l.recompute_layers = "1,2";
  std::vector<std::string> got;
  for (const auto& p : training_proposals(l, model(), 8))
    got.push_back(std::string(recompute_name(p.layout.recompute)) + "/" + std::to_string(p.layout.recompute_layers));
  EXPECT_THAT(got, ElementsAre("none/0", "selective/0", "full/1", "full/2"));
}

TEST(SearchLists, EverySizeThatDoesNotDivideIsNamedWithWhatItFailsToDivide) {
  SearchLists l = lists();
  l.tensor = "5", l.pipeline = "3", l.data = "1", l.sequence_parallel = "true", l.micro_batch = "3", l.recompute = "none";
  const std::vector<Proposal> ps = training_proposals(l, model(), 8);
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
  const std::vector<Proposal> ps = training_proposals(l, model(), 4);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_THAT(ps[0].problems, ElementsAre(HasSubstr("is not the 4 devices"), "v = 2 virtual stages need p >= 2"));
  EXPECT_THAT(ps[1].problems, ElementsAre("interleaving needs the 2 micro-batches to be a multiple of p = 4"));
}

TEST(SearchLists, AnEntryThatIsNotAWholeNumberIsRefusedNamingTheKey) {
  SearchLists l = lists();
  l.pipeline = "1,two";
  try {
    training_proposals(l, model(), 8);
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

TEST(SearchLists, InferenceRefusesMoreRanksThanTheDevices) {
  SearchLists l = lists();
  l.tensor = "4", l.pipeline = "2";
  const std::vector<Proposal> ps = inference_proposals(l, "1", model(), 4);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_THAT(ps[0].problems, ElementsAre("t*p = 8 is more than the 4 devices of the cluster"));
}

}  // namespace
}  // namespace mh::tuner
