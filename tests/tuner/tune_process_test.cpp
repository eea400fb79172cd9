// megahost tuning as a user runs it: a config with [tuner] ranks its
// candidates, measures the best, writes the tables and a winner that runs
// unchanged; and the dry runs it relies on are exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/temp_dir.hpp"
#include "host/megahost_process.hpp"
#include "support/files.hpp"
#include "tuner/probe.hpp"

namespace mh {
namespace {

using data::testing::TempDir;
using host::testing::fixture;
using host::testing::Outcome;
using host::testing::run_megahost;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kTiny = std::string(MEGAHOST_TEST_TUNER_DIR) + "/tiny_tune.toml";

// Lines of a CSV file after its header.
std::vector<std::string> rows(const std::string& file) {
  std::vector<std::string> out;
  std::istringstream in(mh::test::file_bytes(file));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> fields(const std::string& row) {
  std::vector<std::string> out;
  std::istringstream in(row);
  for (std::string field; std::getline(in, field, ',');) out.push_back(field);
  return out;
}

TEST(Tune, RanksMeasuresTheBestAndWritesAWinnerThatRunsUnchanged) {
  TempDir dir;
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out")});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, AllOf(HasSubstr("ranked (step s: cost model"), HasSubstr("rejected ("), HasSubstr("best: ")));
  const std::vector<std::string> ranked = rows(dir.file("out/ranked.csv"));
  ASSERT_FALSE(ranked.empty());
  // The best of the cost model was measured (top_k = 1) and now ranks first.
  EXPECT_THAT(ranked[0], HasSubstr(",dry_run,\"best\""));
  const std::vector<std::string> best = fields(ranked[0]);
  ASSERT_GT(best.size(), 10u);
  EXPECT_NE(best[10], "0.000000") << "step_s_measured of " << ranked[0];
  EXPECT_FALSE(rows(dir.file("out/rejected.csv")).empty());
  EXPECT_THAT(mh::test::file_bytes(dir.file("out/report.txt")), HasSubstr("tuned " + kTiny));
  const Outcome run = run_megahost({"--config", dir.file("out/tuned.toml"), "train.steps=1"});
  EXPECT_EQ(run.status, 0) << run.err;
}

// The ranked rows' columns by the CSV header's names.
std::vector<std::map<std::string, std::string>> named_rows(const std::string& file) {
  std::istringstream in(mh::test::file_bytes(file));
  std::string header;
  std::getline(in, header);
  const std::vector<std::string> names = fields(header);
  std::vector<std::map<std::string, std::string>> out;
  for (const std::string& row : rows(file)) {
    const std::vector<std::string> f = fields(row);
    std::map<std::string, std::string>& named = out.emplace_back();
    for (size_t i = 0; i < names.size(); ++i) named[names[i]] = i < f.size() ? f[i] : "";
  }
  return out;
}

// megahost tuning with `args` into dir/`out`; with `cap_gib`, on
// test_cpu.toml holding that much memory per device (a cap between two
// candidates' peaks).
Outcome tune(TempDir& dir, std::vector<std::string> args, const std::string& out,
             std::optional<double> cap_gib = std::nullopt) {
  args.push_back("output.dir=" + dir.file(out));
  if (cap_gib) {
    std::string profile = mh::test::file_bytes(std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml");
    profile.replace(profile.find("memory_gib = 8"), 14, "memory_gib = " + std::to_string(*cap_gib));
    args.push_back("tuner.cluster=" + dir.write("capped_cpu.toml", profile));
  }
  return run_megahost(args);
}

// The largest "total" of a dry run's per-rank memory table (MiB): the
// eighth column of the rows that start with a rank.
double peak_mib(const std::string& output) {
  std::istringstream in(output);
  double out = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream row(line);
    std::vector<std::string> cells;
    for (std::string cell; row >> cell;) cells.push_back(cell);
    if (cells.size() > 8 && cells[0].find_first_not_of("0123456789") == std::string::npos)
      out = std::max(out, std::stod(cells[7]));
  }
  return out;
}

// The tiny model with a 2048-token sequence, searched over cp = 1 and 2 on
// the test CPU's two ranks: one layout each of the rest.
const std::vector<std::string> kLongSequence{"--config", kTiny, "model.seq_len=2048", "tuner.tensor=\"1\"",
                                             "tuner.pipeline=\"1\"", "tuner.micro_batch=\"1\"",
                                             "tuner.recompute=none", "tuner.top_k=0", "tuner.context=\"1,2\""};

// Where one rank cannot hold a long sequence's activations, splitting it
// over the context group can: the tuner finds that, and its winner's
// config dry-runs with the memory the table gave it (the engine's own dry
// run priced every candidate).
TEST(Tune, ALongSequenceThatOverflowsOneRankIsSplitByContextParallelism) {
  TempDir dir;
  const Outcome first = tune(dir, kLongSequence, "sizes");
  ASSERT_EQ(first.status, 0) << first.err << first.out;
  double whole = 0, split = 0;  // the peaks per rank, GiB: cp = 1, and the largest cp = 2
  for (const auto& row : named_rows(dir.file("sizes/ranked.csv")))
    (row.at("context") == "1" ? whole : split) = std::max(row.at("context") == "1" ? whole : split,
                                                          std::stod(row.at("memory_gib")));
  ASSERT_GT(split, 0);
  ASSERT_LT(split, whole);
  // A device shared by the node's 2 ranks, with room per rank between the two.
  const Outcome o = tune(dir, kLongSequence, "out", split + whole);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const auto ranked = named_rows(dir.file("out/ranked.csv"));
  ASSERT_FALSE(ranked.empty());
  for (const auto& row : ranked) EXPECT_EQ(row.at("context"), "2");
  EXPECT_THAT(mh::test::file_bytes(dir.file("out/rejected.csv")), HasSubstr("OOM by"));
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("[parallel.context]\ncomm_type = '" + ranked[0].at("context_comm") + "'\nsize = 2\n"),
                           HasSubstr("world_size = 2")));
  const Outcome dry = run_megahost({"--config", dir.file("out/tuned.toml"), "--dry_run"});
  ASSERT_EQ(dry.status, 0) << dry.err;
  // The largest total per rank of the dry run's memory table is the
  // table's memory, to the CSV's 3 decimals of a GiB.
  EXPECT_NEAR(peak_mib(dry.out + dry.err) / 1024, std::stod(ranked[0].at("memory_gib")), 0.0005);
}

// A mixture of experts is searched over ep, with context and tensor
// parallelism too (ep then divides d cp t); the splits its engine refuses
// (t > 1 without sequence parallelism) are rejected with their reasons.
TEST(Tune, AMixtureOfExpertsSearchesExpertParallelismAndSkipsWhatItsEngineRefuses) {
  TempDir dir;
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "model.experts=4",
                                  "model.router_topk=2", "model.activation=\"swiglu\"", "model.bias=false",
                                  "tuner.tensor=\"1,2\"", "tuner.pipeline=\"1\"", "tuner.micro_batch=\"1\"",
                                  "tuner.recompute=none", "tuner.top_k=0", "tuner.context=\"1,2\"",
                                  "tuner.expert=\"1,2\""});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  std::vector<std::string> ranked;
  for (const auto& row : named_rows(dir.file("out/ranked.csv")))
    ranked.push_back("t=" + row.at("tensor") + " cp=" + row.at("context") + " ep=" + row.at("expert") + " " +
                     row.at("memory_source"));
  // cp = 2 twice: all_gather and a2a.
  EXPECT_THAT(ranked, ::testing::UnorderedElementsAre("t=1 cp=1 ep=1 dry_run", "t=1 cp=1 ep=2 dry_run",
                                                      "t=1 cp=2 ep=1 dry_run", "t=1 cp=2 ep=1 dry_run",
                                                      "t=1 cp=2 ep=2 dry_run", "t=1 cp=2 ep=2 dry_run",
                                                      "t=2 cp=1 ep=1 dry_run", "t=2 cp=1 ep=2 dry_run"));
  EXPECT_THAT(mh::test::file_bytes(dir.file("out/rejected.csv")),
              HasSubstr("t = 2 without sequence parallelism: the mixture of experts needs it"));
  const Outcome dry = run_megahost({"--config", dir.file("out/tuned.toml"), "--dry_run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
}

// tuned.toml lives in the tuner's folder: the checkpoints and logs the tuned
// config names relatively land beside the tuned config, as they would have.
TEST(Tune, TheWinnerSavesAndLogsWhereTheTunedConfigSaid) {
  TempDir dir;
  const std::string config = dir.write("tune.toml", "[model]\nlayers = 2\nhidden = 64\nheads = 4\nseq_len = 32\n"
      "[train]\nglobal_batch = 4\nmicro_batch = 1\n[data]\npath = \"" + std::string(MEGAHOST_TEST_DATA) + "\"\n"
      "[checkpoint]\ndir = \"ckpt\"\n[output]\ntensorboard_dir = \"board\"\n"
      "[tuner]\nplugin = \"grid\"\ncluster = \"" + std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml\"\n"
      "tensor = \"1\"\npipeline = \"1\"\nmicro_batch = \"1\"\nrecompute = \"none\"\n");
  const Outcome o = run_megahost({"--config", config});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const std::string tuned = mh::test::file_bytes(dir.file("tuner_out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("dir = '" + dir.file("ckpt") + "'"),
                           HasSubstr("tensorboard_dir = '" + dir.file("board") + "'")));
}

TEST(Tune, WhenNothingFitsItSaysSoExitsOneAndWritesNoWinner) {
  TempDir dir;
  std::string profile = mh::test::file_bytes(std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml");
  profile.replace(profile.find("memory_gib = 8"), 14, "memory_gib = 0.0001");
  const std::string small = dir.write("small_cpu.toml", profile);
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "tuner.cluster=" + small});
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.out, AllOf(HasSubstr("OOM by"), HasSubstr("no candidate fits; nothing to run")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/tuned.toml")));
}

// Tuning for GPUs on a machine without one: the dry runs simulate the
// devices and the communicator, and the winner is the config to launch there.
TEST(Tune, ForAGpuClusterWritesTheNcclCudaRunToLaunchAndItsLaunchLineAndItDryRunsUnchanged) {
  TempDir dir;
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "tuner.cluster=dgx_a100_80gb",
                                  "tuner.top_k=0"});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  EXPECT_THAT(o.out, AllOf(HasSubstr("mpirun -np 8 --npernode 8 "), HasSubstr("srun --nodes 1 --ntasks-per-node 8 ")));
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("plugin = 'nccl'"), HasSubstr("world_size = 8"), HasSubstr("plugin = 'cuda'"),
                           HasSubstr("# Run it with:\n#   mpirun -np 8")));
  EXPECT_THAT(tuned, ::testing::Not(HasSubstr("'threads'")));
  const Outcome dry = run_megahost({"--config", dir.file("out/tuned.toml"), "--dry_run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
}

TEST(Tune, WhenEveryDryRunFailsItSaysSoNotThatNothingFits) {
  TempDir dir;
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "tuner.top_k=0",
                                  "data.path=" + dir.file("missing")});
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.out, HasSubstr("the dry runs failed"));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("no candidate fits")));
}

// The predicted step of each recompute policy in a CSV's rows.
std::map<std::string, double> predicted_by_policy(const std::vector<std::string>& csv_rows) {
  std::map<std::string, double> out;
  for (const std::string& row : csv_rows) {
    const std::vector<std::string> f = fields(row);
    out[f.at(7)] = std::stod(f.at(9));
  }
  return out;
}

// recompute = "auto" is every policy the registry holds: a third party's
// "mlp_only" (tests/fixtures/mlp_recompute.cpp), which recomputes FC1 and
// its activation, is dry-run and priced from its keep table between none
// and full.
TEST(Tune, AThirdPartysRecomputePolicyIsSearchedAndPricedBetweenNoneAndFull) {
  TempDir dir;
  const Outcome o = run_megahost({"--plugin_path", fixture("mlp_recompute"), "--config", kTiny,
                                  "output.dir=" + dir.file("out"), "tuner.tensor=\"1\"", "tuner.pipeline=\"1\"",
                                  "tuner.micro_batch=\"1\"", "tuner.recompute=auto", "tuner.top_k=0"});
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  std::vector<std::string> all = rows(dir.file("out/ranked.csv"));
  for (const std::string& r : rows(dir.file("out/rejected.csv"))) all.push_back(r);
  const std::map<std::string, double> step = predicted_by_policy(all);
  ASSERT_EQ(step.count("mlp_only"), 1u) << mh::test::file_bytes(dir.file("out/report.txt"));
  EXPECT_LT(step.at("none"), step.at("mlp_only"));
  EXPECT_LT(step.at("mlp_only"), step.at("full"));
  EXPECT_THAT(mh::test::file_bytes(dir.file("out/ranked.csv")), HasSubstr(",mlp_only,0,"));
}

// Under a memory cap only the distributed optimizer's sharded state meets
// (2 ranks of the test CPU, d = 2), the pick uses it, and the config
// written for it dry-runs as it stands.
TEST(Tune, UnderACapOnlyTheDistributedOptimizerMeetsThePickUsesItAndItsConfigDryRuns) {
  TempDir dir;
  // h = 256: 1.6 M parameters, whose 16 or 12 bytes each the table's GiB tell apart.
  const std::vector<std::string> search{"--config", kTiny, "model.hidden=256", "tuner.tensor=\"1\"", "tuner.pipeline=\"1\"",
                                        "tuner.micro_batch=\"1\"",
                                        "tuner.recompute=none", "tuner.top_k=0", "tuner.distributed_optimizer=auto",
                                        "tuner.overlap_param_gather=auto"};
  const Outcome sizes = tune(dir, search, "sizes");
  ASSERT_EQ(sizes.status, 0) << sizes.err << sizes.out;
  // The dry runs' peaks per rank, plain and sharded, from the ranked table.
  double plain = 0, sharded = 1e30;
  for (const std::string& row : rows(dir.file("sizes/ranked.csv"))) {
    const std::vector<std::string> f = fields(row);
    const double gib = std::stod(f.at(15));
    if (f.at(18) == "false") plain = std::max(plain, gib);  // distributed_optimizer
    else sharded = std::min(sharded, gib);
  }
  ASSERT_LT(sharded, plain);
  // A device shared by the node's 2 ranks, with memory between the two.
  const Outcome o = tune(dir, search, "out", sharded + plain);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const std::vector<std::string> ranked = rows(dir.file("out/ranked.csv"));
  ASSERT_EQ(ranked.size(), 2u) << mh::test::file_bytes(dir.file("out/report.txt"));
  for (const std::string& row : ranked) EXPECT_THAT(row, HasSubstr(",true,")) << "distributed optimizer";
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, HasSubstr("distributed_optimizer = true"));
  const Outcome dry = run_megahost({"--config", dir.file("out/tuned.toml"), "--dry_run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
}

// Where --calibrate writes by default: found by name before the shipped profiles.
TEST(Tune, AProfileInTheUsersFolderIsFoundByName) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("config/megahost/hardware"));
  dir.write("config/megahost/hardware/mine.toml", mh::test::file_bytes(std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml"));
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = xdg != nullptr ? xdg : "";
  setenv("XDG_CONFIG_HOME", dir.file("config").c_str(), 1);
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "tuner.cluster=mine", "tuner.top_k=0"});
  if (xdg != nullptr) setenv("XDG_CONFIG_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("best: "));
}

TEST(Tune, AnUnknownProfileFailsNamingIt) {
  TempDir dir;
  const Outcome o = run_megahost({"--config", kTiny, "output.dir=" + dir.file("out"), "tuner.cluster=dgx_q900"});
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("no hardware profile 'dgx_q900'"));
}

TEST(Tune, ATunerOfAbi10LoadsButIsRefusedForTuningWithTheReason) {
  TempDir dir;
  const Outcome listing = run_megahost({"--plugin_path", fixture("older_tuner"), "--list_plugins"});
  EXPECT_EQ(listing.status, 0) << listing.err;
  EXPECT_FALSE(host::testing::listed(listing.out, "tuner", "older").empty());
  const Outcome o = run_megahost({"--plugin_path", fixture("older_tuner"), "--config",
                                  dir.write("run.toml", "[tuner]\nplugin = \"older\"\n")});
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("tuner 'older' implements the tuner table of ABI 1.0 (next and report only)"));
}

const std::vector<std::string> kGenerate = {"tuner.goal=inference_latency", "tuner.inference_batch=1,2",
                                            "tuner.prompt_len=8", "tuner.output_len=4", "tuner.top_k=1"};

// Tuning generation: every candidate's generate config dry-run for its
// memory, the best one generated with for real, the table in generation's
// columns, and a winner that dry-runs and generates unchanged.
TEST(Tune, AnInferenceGoalRanksByTokenTimesAndWritesAGenerateConfigThatRuns) {
  TempDir dir;
  std::vector<std::string> args{"--config", kTiny, "output.dir=" + dir.file("out")};
  args.insert(args.end(), kGenerate.begin(), kGenerate.end());
  const Outcome o = run_megahost(args);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  EXPECT_THAT(o.out, AllOf(HasSubstr("TTFT s"), HasSubstr("TPOT ms"), HasSubstr("best: t=")));
  EXPECT_THAT(mh::test::file_bytes(dir.file("out/ranked.csv")), HasSubstr("rank,tensor,pipeline,batch,ttft_s_predicted,ttft_s_measured"));
  const std::vector<std::string> best = fields(rows(dir.file("out/ranked.csv"))[0]);
  ASSERT_GT(best.size(), 11u);
  EXPECT_NE(best[5], "0.000000") << "ttft_s_measured";
  EXPECT_NE(best[10], "0.000") << "memory_gib from the dry run";
  EXPECT_EQ(best[11], "dry_run");
  // The measured run served its warm-up, as predicted, then the measured batches.
  const int64_t warm_up = warm_up_batches(std::stod(best[4]) + 4 * std::stod(best[6]));
  EXPECT_GT(warm_up, 1) << "a tiny model's batch takes milliseconds";
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/prompts_b" + best[3] + "_x" +
                                               std::to_string(warm_up + kMeasuredBatches) + ".txt")));
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("[generate]"), HasSubstr("max_new_tokens = 4"), HasSubstr("stop_at_eod = false"),
                           HasSubstr("prompts_b")));
  const Outcome dry = run_megahost({"--config", dir.file("out/tuned.toml"), "--dry_run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  const Outcome run = run_megahost({"--config", dir.file("out/tuned.toml"), "--metrics_out", dir.file("m.jsonl")});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(mh::test::file_bytes(dir.file("m.jsonl")), HasSubstr("\"ttft_s\""));
}

// A fresh process's first batches ran with its team's threads sharing a
// core; a measured run discards what its first quarter second serves.
TEST(Tune, AMeasuredGenerationWarmsUpForTheBatchesOfItsFirstQuarterSecond) {
  EXPECT_EQ(warm_up_batches(0.01), 25);
  EXPECT_EQ(warm_up_batches(0.3), 1);
  EXPECT_EQ(warm_up_batches(1e-6), kMostWarmUpBatches);
  EXPECT_EQ(warm_up_batches(0), 1) << "nothing predicted: one, the run's first calls";
}

TEST(Tune, AnInferenceGoalKeepsTheConfigsOwnPromptInTheWinner) {
  TempDir dir;
  // tiny_tune.toml with its paths absolute, since this copy lives elsewhere.
  std::string text = mh::test::file_bytes(kTiny);
  auto replace = [&](const std::string& from, const std::string& to) { text.replace(text.find(from), from.size(), to); };
  replace("../../data/corpus_byte", MEGAHOST_TEST_DATA);
  replace("\"test_cpu.toml\"", "\"" + std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml\"");
  const std::string own = dir.write("own.toml", text + "\n[generate]\nprompt = \"Once upon\"\ntemperature = 0.5\n");
  std::vector<std::string> args{"--config", own, "output.dir=" + dir.file("out"), "tuner.top_k=0"};
  args.insert(args.end(), kGenerate.begin(), kGenerate.end() - 1);
  const Outcome o = run_megahost(args);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("prompt = 'Once upon'"), HasSubstr("temperature = 0.5")));
  EXPECT_THAT(tuned, ::testing::Not(HasSubstr("prompts_file")));
  const Outcome run = run_megahost({"--config", dir.file("out/tuned.toml")});
  EXPECT_EQ(run.status, 0) << run.err;
}

TEST(Tune, AnInferenceGoalWithAServeSectionWritesAServeConfigOfTheWinner) {
  TempDir dir;
  std::string text = mh::test::file_bytes(kTiny);
  auto replace = [&](const std::string& from, const std::string& to) { text.replace(text.find(from), from.size(), to); };
  replace("../../data/corpus_byte", MEGAHOST_TEST_DATA);
  replace("\"test_cpu.toml\"", "\"" + std::string(MEGAHOST_TEST_TUNER_DIR) + "/test_cpu.toml\"");
  const std::string own = dir.write("own.toml", text + "\n[serve]\nport = 0\nmax_queue = 5\n");
  std::vector<std::string> args{"--config", own, "output.dir=" + dir.file("out"), "tuner.top_k=0"};
  args.insert(args.end(), kGenerate.begin(), kGenerate.end() - 1);
  const Outcome o = run_megahost(args);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const std::vector<std::string> best = fields(rows(dir.file("out/ranked.csv"))[0]);
  const std::string tuned = mh::test::file_bytes(dir.file("out/tuned.toml"));
  EXPECT_THAT(tuned, AllOf(HasSubstr("[serve]"), HasSubstr("max_batch = " + best[3]), HasSubstr("max_queue = 5"),
                           HasSubstr("port = 0")));
  EXPECT_THAT(tuned, ::testing::Not(::testing::AnyOf(HasSubstr("[generate]"), HasSubstr("[tuner]"))));
}

// Every rank's peaks per category, from a dry run of the tiny model (four
// layers) with `overrides`.
std::vector<nlohmann::json> dry_run_peaks(TempDir& dir, const std::vector<std::string>& overrides) {
  const std::string model = mh::test::file_bytes(kTiny).substr(0, mh::test::file_bytes(kTiny).find("[tuner]"));
  std::vector<std::string> args{"--config", dir.write("run.toml", model), "--dry_run", "--metrics_out",
                                dir.file("m.jsonl"), "model.layers=4",
                                std::string("data.path=") + MEGAHOST_TEST_DATA};
  args.insert(args.end(), overrides.begin(), overrides.end());
  std::filesystem::remove(dir.file("m.jsonl"));
  const Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 0) << o.err;
  std::ifstream in(dir.file("m.jsonl"));
  std::vector<nlohmann::json> ranks;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("final"))
      for (auto& r : j["memory"]) ranks.push_back(r);
  }
  return ranks;
}

// The tuner's dry runs stop at 3p micro-batches (candidate_config.hpp):
// by then every schedule holds the most it ever holds.
TEST(DryRuns, StoppedAtThreePMicroBatchesTheyHaveTheFullStepsPeaks) {
  TempDir dir;
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"comm.world_size=2", "parallel.pipeline.size=2"},
        {"comm.world_size=2", "parallel.pipeline.size=2", "parallel.pipeline.schedule=interleaved",
         "parallel.pipeline.virtual_stages=2"},
        {"comm.world_size=4", "parallel.pipeline.size=4", "recompute.plugin=full"}}) {
    const int p = layout[1].back() - '0';
    std::vector<std::string> full = layout, capped = layout;
    full.push_back("train.global_batch=24");
    capped.push_back("train.global_batch=" + std::to_string(3 * p));
    const auto a = dry_run_peaks(dir, full), b = dry_run_peaks(dir, capped);
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r)
      for (const char* c : {"params", "grads", "optimizer", "activations", "workspace", "comm", "total"})
        EXPECT_EQ(a[r][c], b[r][c]) << c << " of rank " << r << " with " << layout.back();
  }
}

}  // namespace
}  // namespace mh
