// megahost --evaluate: the loss over the whole valid and test splits, the
// same on every layout as on one rank, equal to what training reported for
// the same weights, every sample counted once; and the refusals.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "layout_run.hpp"
#include "support/process.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

// Both splits from the one corpus; no validation during training.
constexpr const char* kSplits = " data.split=98,1,1";

// The --evaluate records of a run, by split.
std::map<std::string, nlohmann::json> evaluated(const LayoutResult& r) {
  std::map<std::string, nlohmann::json> out;
  std::istringstream in(r.metrics);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("evaluate")) out[j["evaluate"].get<std::string>()] = j;
  }
  return out;
}

// Three steps on one rank, validating the whole split at step 3 and saving
// a checkpoint there; the test split's loss comes at the end.
struct Trained {
  fs::path dir = fs::temp_directory_path() / ("megahost_evaluate_" + std::to_string(getpid()));
  LayoutResult run;
  Trained() {
    fs::remove_all(dir);
    run = run_layout(std::string("comm.world_size=1 train.steps=3 train.eval_interval=3 train.eval_batches=0") +
                     kSplits + " checkpoint.dir=" + dir.string());
  }
  ~Trained() { fs::remove_all(dir); }
  std::string load() const { return " checkpoint.load=" + dir.string(); }
};

const Trained& trained() {
  static const Trained t;
  return t;
}

// The trained checkpoint evaluated on one rank.
const LayoutResult& one_rank() {
  static const LayoutResult r = run_layout(std::string("--evaluate comm.world_size=1") + kSplits + trained().load());
  return r;
}

void expect_same_figures(const LayoutResult& ref, const LayoutResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto want = evaluated(ref), got = evaluated(r);
  ASSERT_EQ(got.size(), 2u) << r.metrics;
  for (const char* split : {"valid", "test"}) {
    const double loss = want.at(split)["loss"].get<double>();
    EXPECT_NEAR(got.at(split)["loss"].get<double>(), loss, 1e-5 * loss) << split;
    EXPECT_EQ(got.at(split)["tokens"], want.at(split)["tokens"]) << split;
  }
}

TEST(Evaluate, ReportsBothSplitsOnStdoutAndInTheMetrics) {
  const LayoutResult& r = one_rank();
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto records = evaluated(r);
  ASSERT_EQ(records.size(), 2u) << r.metrics;
  for (const auto& [split, j] : records) {
    EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["loss"].get<double>()), 1e-9 * j["perplexity"].get<double>());
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    EXPECT_EQ(j["tokens"].get<int64_t>() % 32, 0) << "whole samples of seq_len 32";
    EXPECT_NE(r.log.find(split + ": loss "), std::string::npos) << r.log;
  }
  EXPECT_NE(r.log.find("evaluating the model of " + trained().dir.string()), std::string::npos) << r.log;
  EXPECT_TRUE(series(r, "step").empty() && r.grads.empty()) << "no training step, no gradients: " << r.metrics;
}

TEST(Evaluate, EqualsTheWholeSplitLossesTrainingReportedForTheSameWeights) {
  const LayoutResult& t = trained().run;
  ASSERT_EQ(t.exit_code, 0) << t.log;
  const std::vector<double> val = series(t, "val_loss"), test = series(t, "test_loss");
  ASSERT_EQ(val.size(), 1u) << t.metrics;
  ASSERT_EQ(test.size(), 1u) << t.metrics;
  EXPECT_NEAR(series(t, "test_perplexity").at(0), std::exp(test[0]), 1e-9 * std::exp(test[0]));
  EXPECT_NE(t.log.find("validation loss at iteration 3 on test set"), std::string::npos) << t.log;
  const auto records = evaluated(one_rank());
  ASSERT_EQ(records.size(), 2u) << one_rank().log;
  EXPECT_NEAR(records.at("valid")["loss"].get<double>(), val[0], 1e-6 * val[0]);
  EXPECT_NEAR(records.at("test")["loss"].get<double>(), test[0], 1e-6 * test[0]);
}

// A micro-batch of 7 leaves the split's last one partly filled; one sample
// per micro-batch never does. Counting a sample twice would move the mean.
TEST(Evaluate, CountsEverySampleOnceWhateverTheMicroBatch) {
  const LayoutResult& ref = one_rank();
  const LayoutResult single = run_layout(std::string("--evaluate comm.world_size=1 train.micro_batch=1 "
                                                     "train.global_batch=1") + kSplits + trained().load());
  const LayoutResult seven = run_layout(std::string("--evaluate comm.world_size=1 train.micro_batch=7 "
                                                    "train.global_batch=7") + kSplits + trained().load());
  expect_same_figures(single, seven);
  expect_same_figures(ref, single);
  for (const auto& [split, j] : evaluated(single))
    EXPECT_NE(j["tokens"].get<int64_t>() / 32 % 7, 0) << split << ": a whole number of micro-batches tests nothing";
}

struct Layout {
  const char* name;
  const char* overrides;
  bool mpi = false;
  int ranks = 0;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class EvaluateLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(EvaluateLayouts, GivesOneRanksFigures) {
  const Layout& l = GetParam();
  const LayoutResult r = run_layout(std::string("--evaluate ") + l.overrides + (l.mpi ? " comm.plugin=mpi" : "") +
                                        kSplits + trained().load(),
                                    l.mpi, l.ranks);
  expect_same_figures(one_rank(), r);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, EvaluateLayouts,
    ::testing::Values(
        Layout{"tp2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
        Layout{"pp2", "comm.world_size=2 parallel.pipeline.size=2"},
        Layout{"dp2", "comm.world_size=2"},
        Layout{"tp2_pp2_dp2", "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2"},
        Layout{"pp2_interleaved_dp2",
               "comm.world_size=4 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved "
               "parallel.pipeline.virtual_stages=2"},
        Layout{"dp2_mpi", "", true, 2},
        Layout{"cp2", "comm.world_size=2 parallel.context.size=2"},
        Layout{"cp2_pp2_dp2", "comm.world_size=8 parallel.context.size=2 parallel.pipeline.size=2"},
        Layout{"cp2_a2a", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a"},
        Layout{"cp4_p2p_flash", "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=p2p "
                                "model.attention_backend=flash"}),
    [](const auto& info) { return std::string(info.param.name); });

// An expert group exchanges tokens in every forward: micro-batches of 11 leave
// one replica a batch short in the last round, and it runs one counting nothing
// (on cp 2 both of its context ranks do, summing the router's statistics).
TEST(Evaluate, ExpertParallelGivesOneRanksFigures) {
  const std::string moe = std::string(" model.arch=llama model.experts=4 model.router_topk=2 model.moe_ffn_hidden=48 "
                                      "model.router_aux_loss_coef=0.01 train.micro_batch=11 train.global_batch=22") +
                          kSplits;
  const LayoutResult one = run_layout("--evaluate comm.world_size=1" + moe);
  const LayoutResult ep2 = run_layout("--evaluate comm.world_size=2 parallel.expert.size=2" + moe);
  expect_same_figures(one, ep2);
  expect_same_figures(one,
                      run_layout("--evaluate comm.world_size=4 parallel.context.size=2 parallel.expert.size=4" + moe));
  for (const auto& [split, j] : evaluated(one))
    EXPECT_NE((j["tokens"].get<int64_t>() / 32 + 10) / 11 % 2, 0) << split << ": an even number of batches tests nothing";
}

TEST(Evaluate, WithoutACheckpointEvaluatesTheInitialisedModelAndSaysSo) {
  const LayoutResult r = run_layout(std::string("--evaluate comm.world_size=1") + kSplits);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("evaluating the freshly initialised model"), std::string::npos) << r.log;
  ASSERT_EQ(evaluated(r).size(), 2u) << r.metrics;
  // Near ln(257): the initialised model knows nothing yet.
  EXPECT_NEAR(evaluated(r).at("valid")["loss"].get<double>(), std::log(257.0), 0.1);
}

// A dataset of its own: 40 documents of 100 bytes, each with its
// end-of-document token, 4040 tokens in all: (4040 - 1) / 32 = 126 samples.
struct SeparateDataset {
  fs::path dir = fs::temp_directory_path() / ("megahost_evaluate_data_" + std::to_string(getpid()));
  std::string prefix = (dir / "separate").string();
  SeparateDataset() {
    fs::create_directories(dir);
    std::ofstream docs(dir / "docs.jsonl");
    for (int d = 0; d < 40; ++d) docs << "{\"text\": \"" << std::string(100, char('a' + d % 26)) << "\"}\n";
    docs.close();
    ProcessSpec prepare;
    prepare.argv = {MEGAHOST_PREPARE_BINARY, "--input", (dir / "docs.jsonl").string(), "--output_prefix", prefix,
                    "--tokenizer", "byte"};
    const ProcessExit exit = run_process(prepare);
    EXPECT_EQ(exit.status, 0) << exit.err;
  }
  ~SeparateDataset() { fs::remove_all(dir); }
};

TEST(Evaluate, NeedsNoTrainingDataWhenTheSplitsAreListed) {
  const SeparateDataset data;
  const LayoutResult r = run_layout("--evaluate comm.world_size=1 'data.test_paths=1 " + data.prefix +
                                    "' data.path=/nonexistent/corpus" + trained().load());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto records = evaluated(r);
  ASSERT_EQ(records.size(), 1u) << r.metrics;
  EXPECT_EQ(records.at("test")["tokens"].get<int64_t>(), 126 * 32);
}

TEST(Evaluate, RefusesAConfigWithNothingToEvaluateNamingTheKey) {
  const LayoutResult split = run_layout("--evaluate comm.world_size=1 data.split=100,0,0");
  EXPECT_EQ(split.exit_code, 2) << split.log;
  EXPECT_NE(split.log.find("nothing to evaluate: data.split = \"100,0,0\""), std::string::npos) << split.log;
  const LayoutResult lists = run_layout(std::string("--evaluate comm.world_size=1 'data.train_paths=1 ") + MEGAHOST_TEST_DATA + "'");
  EXPECT_EQ(lists.exit_code, 2) << lists.log;
  EXPECT_NE(lists.log.find("data.valid_paths and data.test_paths are empty"), std::string::npos) << lists.log;
}

TEST(Evaluate, RefusesADryRun) {
  const LayoutResult r = run_layout("--evaluate --dry_run comm.world_size=1");
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("--dry_run"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace mh::test
