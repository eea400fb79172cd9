// Composition and observation (ABI 1.5), as a user meets them: the kernels
// wrapper "traced" around the component the host resolved, with the inner
// component's options in the same section; the observer "profile" counting
// every op and collective of a short data-parallel run, checked against
// what the wrapper counted reaching the kernels; and the ABI rules that let
// a plugin of the previous minor load and a NULL entry never be called.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "megahost_process.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh::host::testing {
namespace {

using ::testing::HasSubstr;

// Rows of a summary table (first line: header), by the given key columns,
// to the value of column `value`.
std::map<std::string, int64_t> table(const std::string& file, std::vector<size_t> key_columns, size_t value) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "no " << file;
  std::map<std::string, int64_t> rows;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream split(line);
    for (std::string c; std::getline(split, c, '\t');) cells.push_back(c);
    std::string key;
    for (size_t k : key_columns) key += (key.empty() ? "" : "/") + cells.at(k);
    rows[key] = std::stoll(cells.at(value));
  }
  return rows;
}

std::string traced_config(const std::string& dir, const std::string& inner_options) {
  return "[kernels]\nplugin = \"traced\"\ninner = \"cpu\"\ncounts_dir = \"" + dir + "\"\n" + inner_options +
         "[observer]\nplugin = \"profile\"\ndir = \"" + dir + "\"\n[comm]\nworld_size = 2\n";
}

Outcome run_with(const mh::data::testing::TempDir& dir, const std::string& toml, std::vector<std::string> extra) {
  std::vector<std::string> args{"--config", dir.write("run.toml", toml)};
  for (const auto& o : tiny_run()) args.push_back(o);
  args.push_back("train.global_batch=4");  // two data-parallel ranks of micro_batch 2
  for (auto& e : extra) args.push_back(std::move(e));
  return run_megahost(args);
}

TEST(Composition, TracedWrapsTheInnerKernelsAndTheObserverSeesEveryCallThatReachesThem) {
  mh::data::testing::TempDir dir;
  Outcome o = run_with(dir, traced_config(dir.file(""), "threads = 1\n"), {"train.steps=3"});
  ASSERT_EQ(o.status, 0) << o.err;
  for (const char* rank : {"0", "1"}) {
    SCOPED_TRACE(std::string("rank ") + rank);
    const auto traced = table(dir.file(std::string("traced-rank") + rank + ".tsv"), {0}, 1);
    const auto seen = table(dir.file(std::string("profile-rank") + rank + ".tsv"), {0, 2}, 3);
    // Every op event is one call the wrapper forwarded, and the other way
    // round, except the two entries the host asks outside any op: the
    // device's description (once, as it starts) and its stream (for the
    // communicator).
    int64_t ops = 0;
    for (const auto& [key, calls] : seen) {
      if (key.rfind("op/", 0) != 0) continue;
      ops += calls;
      EXPECT_EQ(traced.count(key.substr(3)) ? traced.at(key.substr(3)) : -1, calls) << key;
    }
    for (const auto& [entry, calls] : traced) {
      if (entry != "device_info" && entry != "stream") {
        EXPECT_TRUE(seen.count("op/" + entry)) << entry;
      }
    }
    EXPECT_GT(ops, 0);
    EXPECT_EQ(traced.at("device_info"), 1);
  }
}

TEST(Composition, DataParallelGradientsAreAllReducedOnceEachStepAsTheObserverCountsThem) {
  mh::data::testing::TempDir dir;
  // Steps 2 and 4: the bytes grow linearly in the steps, so any per-run
  // constant (setup collectives) cancels in the difference.
  std::map<int, int64_t> data_bytes, adamw_bytes;
  for (int steps : {2, 4}) {
    Outcome o = run_with(dir, traced_config(dir.file(""), "threads = 1\n"), {"train.steps=" + std::to_string(steps)});
    ASSERT_EQ(o.status, 0) << o.err;
    const auto bytes = table(dir.file("profile-rank0.tsv"), {0, 1, 2}, 5);
    for (const auto& [key, b] : bytes)
      if (key.rfind("collective/data/all-reduce", 0) == 0 || key.rfind("collective/data/reduce-scatter", 0) == 0)
        data_bytes[steps] += b;
    adamw_bytes[steps] = bytes.at("op/-/adamw");
  }
  // Each step, AdamW reads and writes four f32 tensors of every parameter
  // (param, grad, m, v): 16 bytes per parameter; the data-parallel
  // reduction moves each f32 gradient once: 4 bytes per parameter, plus the
  // loss and norm scalars, well under a kilobyte a step.
  const int64_t params_per_two_steps = (adamw_bytes[4] - adamw_bytes[2]) / 16;
  const int64_t reduced = data_bytes[4] - data_bytes[2];
  EXPECT_GT(params_per_two_steps, 10000);
  EXPECT_GE(reduced, 4 * params_per_two_steps);
  EXPECT_LT(reduced, 4 * params_per_two_steps + 2 * 1024);
}

TEST(Composition, InnerOptionsAreValidatedAgainstTheInnerComponentWithFileAndLine) {
  mh::data::testing::TempDir dir;
  Outcome o = run_with(dir, traced_config(dir.file(""), "threads = -1\n"), {"train.steps=1"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("run.toml:5:"));
  EXPECT_THAT(o.err, HasSubstr("'kernels.threads' must be >= 0, got -1"));
}

TEST(Composition, AnUnknownInnerIsRefusedNamingWhatThereIs) {
  mh::data::testing::TempDir dir;
  Outcome o = run_with(dir, "[kernels]\nplugin = \"traced\"\ninner = \"cpux\"\n", {"train.steps=1"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("'kernels.inner': no kernels plugin named 'cpux'"));
  EXPECT_THAT(o.err, HasSubstr("did you mean 'cpu'?"));
}

TEST(Composition, AWrapperCannotWrapAWrapper) {
  mh::data::testing::TempDir dir;
  Outcome o = run_with(dir, "[kernels]\nplugin = \"traced\"\ninner = \"traced\"\n", {"train.steps=1"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("names 'traced', itself a wrapper"));
}

constexpr const char* kKernels14 = "[kernels]\nplugin = \"naive_v1_4\"\n";

// A kernels plugin built with the 1.x SDK for minor 4 (tests/fixtures/kernels_v1.c),
// reached through the host's 1.x adapter.
TEST(PreviousMinor, APluginTargetingAbi14LoadsTrainsAndGenerates) {
  mh::data::testing::TempDir dir;
  Outcome listed_out = run_megahost({"--plugin_path", fixture("kernels_v1_4"), "--list_plugins"});
  EXPECT_EQ(listed_out.status, 0) << listed_out.err;
  EXPECT_EQ(listed(listed_out.out, "kernels", "naive_v1_4").at(3), "1.4");
  Outcome trained = run_with(dir, kKernels14, {"--plugin_path", fixture("kernels_v1_4"), "train.steps=2"});
  EXPECT_EQ(trained.status, 0) << trained.err;
  // Decoding gives softmax non-square scores: allowed to a 1.4 table,
  // whose strided_copy said so before capabilities did.
  Outcome generated = run_with(dir, std::string(kKernels14) + "[generate]\nprompt = \"Hi\"\nmax_new_tokens = 4\n",
                               {"--plugin_path", fixture("kernels_v1_4")});
  EXPECT_EQ(generated.status, 0) << generated.err;
}

// Packed documents need softmax and rope to read the 1.6 fields, which an
// older component would silently ignore: the run is refused before step 1.
TEST(PreviousMinor, PackedDocumentsAreRefusedOnKernelsWithoutTheDocumentsCapability) {
  mh::data::testing::TempDir dir;
  Outcome o = run_with(dir, kKernels14,
                       {"--plugin_path", fixture("kernels_v1_4"), "train.steps=1", "data.reset_attention_mask=true"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("data.reset_attention_mask needs kernels with MH_KERNELS_CAP_DOCUMENTS"));
}

// A table whose required entries hold a NULL is refused when it loads; the
// same NULL in an optional entry would only make that entry absent.
TEST(NullEntries, ARequiredNullEntryIsRefusedAtLoadNamingIt) {
  static MH_Error* (*const decide)(MH_Instance*, const MH_RecomputeQuery*, int32_t*) = nullptr;
  static const MH_RecomputeApi api{MH_STRUCT_SIZE(MH_RecomputeApi, decide), decide};
  const MH_ComponentDesc component{MH_STRUCT_SIZE(MH_ComponentDesc, api),
                                   MH_KIND_RECOMPUTE,
                                   "null_decide",
                                   "1.0.0",
                                   "",
                                   nullptr,
                                   0,
                                   [](const MH_CreateArgs*, MH_Instance**) -> MH_Error* { return nullptr; },
                                   [](MH_Instance*) {},
                                   &api};
  const MH_PluginDesc desc{MH_STRUCT_SIZE(MH_PluginDesc, option_size), MH_ABI_MAJOR, MH_ABI_MINOR, "null", "1.0.0",
                           &component, 1, sizeof(MH_ComponentDesc), sizeof(MH_OptionSpec)};
  EXPECT_THAT(descriptor_problem(&desc), HasSubstr("component #0 ('null_decide') has a NULL entry #0 among those its "
                                                   "kind requires (recompute)"));
}

}  // namespace
}  // namespace mh::host::testing
