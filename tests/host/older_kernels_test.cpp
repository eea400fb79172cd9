// Plugins built with the ABI 1.8 SDK (tests/fixtures/kernels_v1.c and
// planners_v1.c, plain C against the frozen 1.8 header), run by megahost
// through its 1.x adapter: the kernels are listed with the ABI they were
// built for, train GPT-2 to the losses of this host's own cpu kernels and
// generate; a tensor plan trains as the built-in one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "megahost_process.hpp"

namespace mh::host::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kNaive = "[kernels]\nplugin = \"naive_v1\"\n";
constexpr const char* kCpu = "[kernels]\nplugin = \"cpu\"\nthreads = 1\n";

// A run of the tiny model with the plugins of fixture folder `folder`.
Outcome run_tiny(const mh::data::testing::TempDir& dir, const std::string& folder, const std::string& toml,
                 std::vector<std::string> extra) {
  std::vector<std::string> args{"--plugin_path", fixture(folder), "--config", dir.write("run.toml", toml)};
  for (const auto& o : tiny_run()) args.push_back(o);
  for (auto& e : extra) args.push_back(std::move(e));
  return run_megahost(args);
}

// The loss of each step a metrics file records, in order.
std::vector<double> losses(const std::string& metrics) {
  std::ifstream in(metrics);
  EXPECT_TRUE(in.good()) << "no " << metrics;
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("loss")) out.push_back(record["loss"].get<double>());
  }
  return out;
}

// Three steps' losses with `kernels`, dropout on (its masks must agree too).
std::vector<double> trained_losses(const std::string& kernels) {
  mh::data::testing::TempDir dir;
  Outcome o = run_tiny(dir, "kernels_v1", kernels,
                       {"train.steps=3", "model.dropout=0.1", "output.metrics=" + dir.file("m.jsonl")});
  EXPECT_EQ(o.status, 0) << o.err;
  return losses(dir.file("m.jsonl"));
}

TEST(KernelsBuiltForAbi1, AreListedWithTheAbiTheyWereBuiltFor) {
  Outcome o = run_megahost({"--plugin_path", fixture("kernels_v1"), "--list_plugins"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(listed(o.out, "kernels", "naive_v1"),
              ElementsAre("kernels", "naive_v1", "1.0.0", "1.8", fixture("kernels_v1") + "/mh_kernels_v1.so"));
}

// The two components compute the same function in f32 in different orders:
// naive_v1 sums each GEMM's K <= 256 products in one left-to-right loop and
// uses libm's expf and tanhf, the cpu kernels block their sums (OpenBLAS)
// and use exp and tanh polynomials within 1e-7 relative. Each result then
// differs by at most about K u = 256 * 6e-8 = 1.5e-5 relative (u the f32
// unit roundoff), and the loss, a mean of log-sum-exps of such logits, by as
// much; three AdamW steps of lr <= 1e-4 move the parameters by at most 3e-4
// each, so a difference in an update's direction (a gradient near 0 that
// flips sign) changes the loss by far less still. Dropout draws the same
// masks (the same Philox counters), so it adds no difference. 1e-4 relative
// leaves a margin of several times that bound.
TEST(KernelsBuiltForAbi1, TrainGpt2ToTheLossesOfTheCpuKernels) {
  const std::vector<double> naive = trained_losses(kNaive), cpu = trained_losses(kCpu);
  ASSERT_EQ(naive.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  for (size_t step = 0; step < cpu.size(); ++step)
    EXPECT_NEAR(naive[step], cpu[step], 1e-4 * std::abs(cpu[step])) << "step " << step + 1;
}

// Decoding gives softmax the last row of the scores and appends to the KV
// cache with strided_copy: both 1.4 features, read from the 1.8 table.
TEST(KernelsBuiltForAbi1, Generate) {
  mh::data::testing::TempDir dir;
  Outcome o =
      run_tiny(dir, "kernels_v1", std::string(kNaive) + "[generate]\nprompt = \"Hi\"\nmax_new_tokens = 4\n", {});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("generated 4 tokens"));
}

// Built for 1.2, its table ends before strided_copy (and holds traps past
// its struct_size): training runs, and generation is refused naming the op.
TEST(KernelsBuiltForAbi1, TargetingAbi12TrainAndRefuseGenerationNamingTheOp) {
  mh::data::testing::TempDir dir;
  const std::string toml = "[kernels]\nplugin = \"naive_v1_2\"\n";
  Outcome trained = run_tiny(dir, "kernels_v1_2", toml, {"train.steps=2"});
  EXPECT_EQ(trained.status, 0) << trained.err;
  Outcome refused = run_tiny(dir, "kernels_v1_2", toml + "[generate]\nprompt = \"Hi\"\n", {});
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("kernels plugin \"naive_v1_2\""));
  EXPECT_THAT(refused.err, HasSubstr("has no strided_copy"));
}

// The Llama ops are absent from its table: the host names the one a model
// needs before anything runs.
TEST(KernelsBuiltForAbi1, AModelNeedingAnOpTheyLackIsRefusedNamingIt) {
  mh::data::testing::TempDir dir;
  Outcome o = run_tiny(dir, "kernels_v1", kNaive, {"train.steps=1", "model.normalization=\"rmsnorm\""});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("has no rmsnorm"));
}

// Composition runs the other way: a 2.0 wrapper ("traced") creates the 1.x
// kernels through the host's registry, with their option forwarded and
// validated, and counts the calls that reach them.
TEST(KernelsBuiltForAbi1, AreWrappedByAWrapperBuiltFor2) {
  mh::data::testing::TempDir dir;
  const std::string toml = "[kernels]\nplugin = \"traced\"\ninner = \"naive_v1\"\ncounts_dir = \"" + dir.file("") +
                           "\"\npeak_gflops = 5\n";
  Outcome o = run_tiny(dir, "kernels_v1", toml, {"train.steps=1"});
  EXPECT_EQ(o.status, 0) << o.err;
  std::ifstream counts(dir.file("traced-rank0.tsv"));
  std::string all((std::istreambuf_iterator<char>(counts)), std::istreambuf_iterator<char>());
  EXPECT_THAT(all, HasSubstr("gemm\t"));
}

// A tensor plan built with the 1.8 SDK (tests/fixtures/planners_v1.c,
// Megatron's plan): asked for this host's weights by name, it shards them
// as the built-in plan does, so two tensor-parallel ranks train to the same
// losses, step for step.
TEST(PlannersBuiltForAbi1, TensorPlanTrainsTwoRanksAsTheBuiltInPlanDoes) {
  std::vector<std::vector<double>> runs;
  for (const char* plan : {"megatron", "megatron_v1"}) {
    mh::data::testing::TempDir dir;
    const std::string toml =
        std::string(kCpu) + "[parallel.tensor]\nplugin = \"" + plan + "\"\nsize = 2\n[comm]\nworld_size = 2\n";
    Outcome o = run_tiny(dir, "planners_v1", toml, {"train.steps=3", "output.metrics=" + dir.file("m.jsonl")});
    EXPECT_EQ(o.status, 0) << o.err;
    runs.push_back(losses(dir.file("m.jsonl")));
  }
  ASSERT_EQ(runs[0].size(), 3u);
  EXPECT_EQ(runs[1], runs[0]);
}

}  // namespace
}  // namespace mh::host::testing
