// The "grid" tuner component through its descriptor and MH_TunerApi, as the
// host drives it: needs, begin, next/report for every candidate, results,
// measured reports, results again.
#include "grid_tuner.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <span>
#include <vector>

#include "component_harness.hpp"
#include "keep_tables.hpp"
#include "plugin_module.hpp"
#include "test_machine.hpp"
#include "training_cost.hpp"

namespace mh::tuner {
namespace {

using mh::testing::Instance;
using mh::testing::Overrides;
using testing::TestMachine;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const MH_ComponentDesc& grid() {
  static const MH_ComponentDesc desc = mh::component<GridTuner>(
      "grid", "0.1.0", "test", std::span<const MH_OptionSpec>(GridTuner::kOptions, GridTuner::kNumOptions));
  return desc;
}

// 8 layers, h = 1024, 16 heads, s = 1024, V = 32768, B = 8, on 8 devices.
MH_ModelShape shape() { return MH_ModelShape{sizeof(MH_ModelShape), 8, 1024, 16, 4096, 1024, 32768, 1, 8, 8}; }

class Search {
 public:
  explicit Search(const Overrides& options) : tuner_(grid(), "tuner", options) {}

  const MH_TunerApi& api() const { return tuner_.api(); }
  MH_Instance* self() const { return tuner_.self(); }

  MH_TunerNeeds needs() const {
    MH_TunerNeeds n{};
    n.struct_size = sizeof(n);
    mh::check(api().needs(self(), &n), "needs");
    return n;
  }
  // What the host does first: lists its recompute policies, begins.
  void begin(MH_ModelShape& s, TestMachine& t) {
    const std::vector<const char*>& names = testing::builtin_policies();
    mh::check(api().recompute_policies(self(), names.data(), names.size()), "recompute_policies");
    mh::check(api().begin(self(), &s, &t.view()), "begin");
  }
  // Runs the search, answering each candidate with memory(candidate) and
  // its keep table, whose columns are `columns`.
  template <class Memory>
  std::vector<MH_Candidate> run(Memory memory, std::span<const char* const> columns = kActivationNames) {
    TestMachine t;
    MH_ModelShape s = shape();
    begin(s, t);
    std::vector<MH_Candidate> seen;
    for (;;) {
      MH_Candidate c{};
      c.struct_size = sizeof(c);
      int32_t done = 0;
      mh::check(api().next(self(), &s, &c, &done), "next");
      if (done) return seen;
      seen.push_back(c);
      MH_Estimate e{};
      e.struct_size = sizeof(e);
      e.capacity_bytes = uint64_t(16) << 30;
      e.memory_bytes = memory(c);
      e.fits = e.memory_bytes <= e.capacity_bytes;
      const std::vector<int32_t> keep = testing::candidate_keep(Model::from(s), c, columns);
      if (c.workload == MH_WORKLOAD_TRAIN) {
        e.keep = keep.data();
        e.keep_layers = s.layers;
        e.activations = columns.data();
        e.num_activations = int64_t(columns.size());
      }
      mh::check(api().report(self(), &c, &e), "report");
    }
  }
  std::span<const MH_TunerResult> results() const {
    const MH_TunerResult* rows = nullptr;
    size_t count = 0;
    mh::check(api().results(self(), &rows, &count), "results");
    return {rows, count};
  }

 private:
  Instance<MH_TunerApi> tuner_;
};

uint64_t fits(const MH_Candidate&) { return uint64_t(1) << 30; }

TEST(GridTuner, ItsTableHasEveryEntry) {
  EXPECT_EQ(static_cast<const MH_TunerApi*>(grid().api)->struct_size, MH_STRUCT_SIZE(MH_TunerApi, recompute_policies));
  const std::string abi = std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR);  // what it was built with
  EXPECT_THAT(mh::testing::describe_module(MH_TEST_PLUGIN), StartsWith("tuner_grid 0.1.0 (ABI " + abi + "): tuner grid [goal"));
}

TEST(GridTuner, NeedsTheProfileTheNodesAndTheMeasuringBudget) {
  Search s({{"cluster", std::string("dgx_h100")}, {"nodes", int64_t{4}}, {"top_k", int64_t{3}}});
  const MH_TunerNeeds n = s.needs();
  EXPECT_STREQ(n.hardware, "dgx_h100");
  EXPECT_EQ(n.nodes, 4);
  EXPECT_EQ(n.devices_per_node, 0);
  EXPECT_EQ(n.measure_top_k, 3);
}

TEST(GridTuner, ProposesOnlyRunnableCandidatesForTheHostToDryRun) {
  Search s({{"tensor", std::string("1,3,8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")}});
  for (const MH_Candidate& c : s.run(fits)) {
    EXPECT_EQ(c.workload, MH_WORKLOAD_TRAIN);
    EXPECT_NE(c.tensor, 3);
  }
  bool named = false;
  for (const auto& r : s.results())
    named |= r.candidate->tensor == 3 && std::string(r.reason).find("t = 3 does not divide the 16 heads") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(GridTuner, ProposesContextAndExpertParallelismInTheCandidate) {
  Search s({{"tensor", std::string("1")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("none")}, {"context", std::string("1,2")}, {"context_comm", std::string("a2a")}});
  std::vector<std::string> got;
  for (const MH_Candidate& c : s.run(fits))
    got.push_back(std::to_string(c.context) + " " + (c.context_comm != nullptr ? c.context_comm : "NULL") + " " +
                  std::to_string(c.expert) + " d=" + std::to_string(c.data));
  EXPECT_THAT(got, ::testing::ElementsAre("1 NULL 1 d=8", "2 a2a 1 d=4"));
}

// A 2.0 host hands over a shorter shape and would run every candidate at
// cp = ep = 1: asking it for more is refused at begin, naming the keys.
TEST(GridTuner, AHostOlderThan21IsRefusedContextOrExpertSizes) {
  Search s({{"context", std::string("1,2")}});
  TestMachine t;
  MH_ModelShape old = shape();
  old.struct_size = MH_STRUCT_SIZE(MH_ModelShape, head_dim);
  const std::vector<const char*>& names = testing::builtin_policies();
  mh::check(s.api().recompute_policies(s.self(), names.data(), names.size()), "recompute_policies");
  MH_Error* error = s.api().begin(s.self(), &old, &t.view());
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(error->message, HasSubstr("tuner.context = \"1,2\""));
  error->destroy(error);
}

TEST(GridTuner, RejectsWhatDoesNotFitByHowMuchAndRanksTheRestFastestFirst) {
  Search s({{"tensor", std::string("1,8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("full")}});
  s.run([](const MH_Candidate& c) { return c.tensor == 1 ? uint64_t(20) << 30 : uint64_t(1) << 30; });
  const auto rows = s.results();
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].verdict, MH_VERDICT_RANKED);
  EXPECT_EQ(rows[0].rank, 1);
  EXPECT_STREQ(rows[0].reason, "best");
  for (size_t i = 1; i < rows.size() && rows[i].verdict == MH_VERDICT_RANKED; ++i) {
    EXPECT_GE(rows[i].step_seconds, rows[i - 1].step_seconds);
    EXPECT_THAT(rows[i].reason, StartsWith("slower than the best by"));
  }
  bool oom = false;
  for (const auto& r : rows)
    if (r.candidate->tensor == 1) {
      EXPECT_EQ(r.verdict, MH_VERDICT_REJECTED);
      EXPECT_STREQ(r.reason, "OOM by 4.00 GiB: needs 20.00 GiB per rank, 16.00 GiB available");
      oom = true;
    }
  EXPECT_TRUE(oom);
}

TEST(GridTuner, MeasuredCandidatesRankFirstByTheirMeasuredTime) {
  Search s({{"tensor", std::string("2,4,8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("selective")}, {"sequence_parallel", std::string("true")}});
  s.run(fits);
  std::vector<MH_Candidate> ranked;
  for (const auto& r : s.results()) ranked.push_back(*r.candidate);
  ASSERT_EQ(ranked.size(), 3u);
  // Measure the second and the third; the third turns out fastest.
  for (int i : {1, 2}) {
    MH_Estimate e{};
    e.struct_size = sizeof(e);
    e.measured = 1;
    e.step_seconds = i == 2 ? 1.0 : 2.0;
    mh::check(s.api().report(s.self(), &ranked[size_t(i)], &e), "report measured");
  }
  const auto rows = s.results();
  EXPECT_EQ(rows[0].candidate->tensor, ranked[2].tensor);
  EXPECT_EQ(rows[0].measured_seconds, 1.0);
  EXPECT_EQ(rows[1].candidate->tensor, ranked[1].tensor);
  EXPECT_STREQ(rows[1].reason, "slower than the best by 100.0% (measured)");
  EXPECT_EQ(rows[2].measured_seconds, 0.0);
}

TEST(GridTuner, ADryRunThatFailedRejectsTheCandidateWithTheEnginesWords) {
  Search s({{"tensor", std::string("8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("none")}, {"sequence_parallel", std::string("false")}});
  TestMachine t;
  MH_ModelShape sh = shape();
  s.begin(sh, t);
  MH_Candidate c{};
  c.struct_size = sizeof(c);
  int32_t done = 0;
  mh::check(s.api().next(s.self(), &sh, &c, &done), "next");
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.failure = "rank 3: allocating 12 bytes of activations: out of fake addresses";
  mh::check(s.api().report(s.self(), &c, &e), "report");
  EXPECT_STREQ(s.results()[0].reason, "dry run failed: rank 3: allocating 12 bytes of activations: out of fake addresses");
}

// Under a memory cap that only the distributed optimizer's 2 + 4 + 12/d
// bytes per parameter meet, the pick uses it; overlapping its gather is
// predicted faster still.
TEST(GridTuner, UnderACapOnlyTheDistributedOptimizerMeetsThePickUsesIt) {
  Search s({{"tensor", std::string("1")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("full")}, {"distributed_optimizer", std::string("auto")},
            {"overlap_param_gather", std::string("auto")}});
  const std::vector<MH_Candidate> seen =
      s.run([](const MH_Candidate& c) { return c.distributed_optimizer ? uint64_t(8) << 30 : uint64_t(20) << 30; });
  ASSERT_EQ(seen.size(), 3u);
  const auto rows = s.results();
  ASSERT_EQ(rows[0].verdict, MH_VERDICT_RANKED);
  EXPECT_EQ(rows[0].candidate->distributed_optimizer, 1);
  EXPECT_EQ(rows[0].candidate->overlap_param_gather, 1);
  EXPECT_EQ(rows[1].candidate->distributed_optimizer, 1);
  EXPECT_EQ(rows[1].candidate->overlap_param_gather, 0);
  EXPECT_LT(rows[0].step_seconds, rows[1].step_seconds);
  EXPECT_EQ(rows[2].verdict, MH_VERDICT_REJECTED);
  EXPECT_EQ(rows[2].candidate->distributed_optimizer, 0);
}

TEST(GridTuner, ATrainingReportWithoutAKeepTableIsRefused) {
  Search s({{"tensor", std::string("8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("selective")}, {"sequence_parallel", std::string("false")}});
  TestMachine t;
  MH_ModelShape sh = shape();
  s.begin(sh, t);
  MH_Candidate c{};
  c.struct_size = sizeof(c);
  int32_t done = 0;
  mh::check(s.api().next(s.self(), &sh, &c, &done), "next");
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.capacity_bytes = 1;
  EXPECT_THAT(mh::testing::describe(s.api().report(s.self(), &c, &e)),
              HasSubstr("INVALID_ARGUMENT: report: no keep table for recompute 'selective'"));
}

// The host names the keep table's columns: the cost model finds the ones
// it prices by name, in any order, and leaves a column it does not know.
TEST(GridTuner, FindsTheKeepTableColumnsItPricesByName) {
  const Overrides options{{"tensor", std::string("8")}, {"pipeline", std::string("1")},
                          {"micro_batch", std::string("1")}, {"recompute", std::string("selective")},
                          {"sequence_parallel", std::string("false")}};
  std::vector<const char*> shuffled(kActivationNames.rbegin(), kActivationNames.rend());
  shuffled.insert(shuffled.begin() + 3, "router_probs");
  Search in_order(options), by_name(options);
  in_order.run(fits);
  by_name.run(fits, shuffled);
  EXPECT_DOUBLE_EQ(by_name.results()[0].step_seconds, in_order.results()[0].step_seconds);
}

TEST(GridTuner, MfuAndDaysFollowFromTheStepTime) {
  Search s({{"tensor", std::string("8")}, {"pipeline", std::string("1")}, {"micro_batch", std::string("1")},
            {"recompute", std::string("none")}, {"sequence_parallel", std::string("false")}, {"tokens", 1e12}});
  s.run(fits);
  const MH_TunerResult& r = s.results()[0];
  const double tokens_per_s = 8.0 * 1024 / r.step_seconds;
  EXPECT_DOUBLE_EQ(r.tokens_per_s, tokens_per_s);
  EXPECT_DOUBLE_EQ(r.days, 1e12 / tokens_per_s / 86400);
  EXPECT_DOUBLE_EQ(r.mfu, model_flops(Model::from(shape())) / (r.step_seconds * 8 * 1e12));
}

Overrides inference_search(const std::string& goal, const std::string& batches) {
  return {{"goal", goal}, {"tensor", std::string("1,8")}, {"pipeline", std::string("1")},
          {"inference_batch", batches}, {"prompt_len", int64_t{64}}, {"output_len", int64_t{32}},
          {"top_k", int64_t{2}}};
}

Overrides latency_search() { return inference_search("inference_latency", "1"); }

TEST(GridTuner, InferenceAsksForItsRequestAndTheMeasuringBudget) {
  Search s(latency_search());
  const MH_TunerNeeds n = s.needs();
  EXPECT_EQ(n.prompt_tokens, 64);
  EXPECT_EQ(n.output_tokens, 32);
  EXPECT_EQ(n.measure_top_k, 2);
}

TEST(GridTuner, InferenceCandidatesTakeTheirMemoryFromTheDryRunAndPredictTheirTokenTimes) {
  Search s(latency_search());
  for (const MH_Candidate& c : s.run([](const MH_Candidate& c) { return uint64_t(c.tensor) << 20; })) {
    EXPECT_EQ(c.workload, MH_WORKLOAD_INFERENCE);
    EXPECT_EQ(c.data, 1);
  }
  const auto rows = s.results();
  ASSERT_EQ(rows[0].verdict, MH_VERDICT_RANKED);
  EXPECT_EQ(rows[0].candidate->tensor, 8);  // eight devices of bandwidth beat one
  EXPECT_EQ(rows[0].memory_measured, 1);
  EXPECT_EQ(rows[0].memory_bytes, uint64_t(8) << 20);
  EXPECT_GT(rows[0].ttft_seconds, 0.0);
  EXPECT_GT(rows[0].tpot_seconds, 0.0);
  EXPECT_DOUBLE_EQ(rows[0].latency_seconds, rows[0].ttft_seconds + 32 * rows[0].tpot_seconds);
  EXPECT_DOUBLE_EQ(rows[0].tokens_per_s, 32 / rows[0].latency_seconds);
}

TEST(GridTuner, MeasuredGenerationRanksByItsTokenTimes) {
  Search s(latency_search());
  s.run(fits);
  const MH_Candidate second = *s.results()[1].candidate;
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.measured = 1;
  e.ttft_seconds = 0.5;
  e.tpot_seconds = 0.25;
  mh::check(s.api().report(s.self(), &second, &e), "report measured");
  const auto rows = s.results();
  EXPECT_EQ(rows[0].candidate->tensor, second.tensor);
  EXPECT_EQ(rows[0].measured_ttft_seconds, 0.5);
  EXPECT_EQ(rows[0].measured_tpot_seconds, 0.25);
  EXPECT_DOUBLE_EQ(rows[0].latency_seconds, 0.5 + 32 * 0.25);
  EXPECT_DOUBLE_EQ(rows[0].tokens_per_s, 32 / (0.5 + 32 * 0.25));
}

TEST(GridTuner, AMeasuredGenerationWithoutTokenTimesIsRefused) {
  Search s(latency_search());
  s.run(fits);
  const MH_Candidate best = *s.results()[0].candidate;
  MH_Estimate e{};
  e.struct_size = MH_STRUCT_SIZE(MH_Estimate, failure);  // a 1.3 host's estimate
  e.measured = 1;
  e.step_seconds = 1;
  MH_Error* error = s.api().report(s.self(), &best, &e);
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(error->message, HasSubstr("needs ttft_seconds and tpot_seconds"));
  error->destroy(error);
}

TEST(GridTuner, ThroughputRanksByTokensPerSecond) {
  Search s(inference_search("inference_throughput", "1,16"));
  s.run(fits);
  const auto rows = s.results();
  for (size_t i = 1; i < rows.size() && rows[i].verdict == MH_VERDICT_RANKED; ++i)
    EXPECT_LE(rows[i].tokens_per_s, rows[i - 1].tokens_per_s);
  EXPECT_EQ(rows[0].candidate->micro_batch, 16);
}

}  // namespace
}  // namespace mh::tuner
