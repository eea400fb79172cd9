// One rule for paths (docs/config.md, "Paths"): a relative path written in a
// config file resolves against that file's folder, one given on the command
// line against the working directory — for every path key and flag alike,
// output.tensorboard_dir, output.metrics and --metrics_out included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "config/config.hpp"
#include "data/temp_dir.hpp"
#include "megahost_process.hpp"

namespace mh::host::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class Paths : public ::testing::Test {
 protected:
  // conf/ holds the config and data/ the corpus it names; the run starts in
  // work/, a third folder, so a path resolved against the wrong base shows.
  void SetUp() override {
    for (const char* folder : {"conf", "data", "work"}) fs::create_directories(dir_.file(folder));
    for (const char* ext : {".bin", ".idx"})
      fs::copy_file(std::string(MEGAHOST_TEST_DATA) + ext, dir_.file(std::string("data/corpus") + ext));
  }
  fs::path at(const std::string& relative) const { return dir_.file(relative); }
  std::string config(const std::string& text) const { return dir_.write("conf/run.toml", text); }

  // megahost started in work/, its output (both streams) returned.
  Outcome run_in_work(const std::vector<std::string>& args) const {
    std::string cmd = "cd '" + at("work").string() + "' && exec 2>&1 && exec " + std::string(MEGAHOST_TEST_BINARY);
    for (const auto& a : args) cmd += " '" + a + "'";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    Outcome o;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) o.err.append(buffer, n);
    const int status = ::pclose(pipe);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return o;
  }
  std::vector<std::string> tiny(const std::vector<std::string>& extra) const {
    std::vector<std::string> args{"--config",         at("conf/run.toml").string(), "model.layers=2",
                                  "model.hidden=64",  "model.heads=2",              "model.seq_len=32",
                                  "train.steps=2",    "train.global_batch=2",       "train.micro_batch=2",
                                  "train.eval_interval=0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  static bool holds_events(const fs::path& folder) {
    if (!fs::is_directory(folder)) return false;
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.path().filename().string().find("tfevents") != std::string::npos) return true;
    return false;
  }

  mh::data::testing::TempDir dir_;
};

TEST_F(Paths, RelativePathsInTheConfigResolveAgainstItsFolder) {
  config(
      "[data]\npath = \"../data/corpus\"\n"
      "[output]\nmetrics = \"metrics.jsonl\"\ntensorboard_dir = \"board\"\n"
      "[checkpoint]\ndir = \"ckpt\"\n");
  const Outcome o = run_in_work(tiny({}));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::exists(at("conf/metrics.jsonl")));
  EXPECT_TRUE(holds_events(at("conf/board")));
  EXPECT_TRUE(fs::is_directory(at("conf/ckpt")));
  EXPECT_TRUE(fs::is_empty(at("work"))) << "the run wrote into its working directory";
}

TEST_F(Paths, RelativePathsOnTheCommandLineResolveAgainstTheWorkingDirectory) {
  config("[train]\nlr = 1e-3\n");
  fs::rename(at("data"), at("work/data"));
  const Outcome o = run_in_work(tiny({"data.path=data/corpus", "output.tensorboard_dir=board", "checkpoint.dir=ckpt",
                                      "output.metrics=metrics.jsonl"}));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::exists(at("work/metrics.jsonl")));
  EXPECT_TRUE(holds_events(at("work/board")));
  EXPECT_TRUE(fs::is_directory(at("work/ckpt")));
  EXPECT_FALSE(fs::exists(at("conf/ckpt")));
  EXPECT_FALSE(fs::exists(at("conf/board")));
}

TEST_F(Paths, MetricsOutFollowsTheWorkingDirectoryAndOverridesTheConfigsMetrics) {
  config("[data]\npath = \"../data/corpus\"\n[output]\nmetrics = \"metrics.jsonl\"\n");
  const Outcome o = run_in_work(tiny({"--metrics_out=flag.jsonl"}));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::exists(at("work/flag.jsonl")));
  EXPECT_FALSE(fs::exists(at("conf/metrics.jsonl")));
}

TEST_F(Paths, AWeightedListOnTheCommandLineKeepsItsWeights) {
  config("[train]\nlr = 1e-3\n");
  fs::rename(at("data"), at("work/data"));
  const Outcome o = run_in_work(tiny({"data.paths=0.5 data/corpus 0.5 " + at("work/data/corpus").string()}));
  EXPECT_EQ(o.status, 0) << o.err;
}

// The overrides as Config::load applies them: a path key's relative value
// becomes absolute against the working directory; anything else is kept.
TEST_F(Paths, OverridesOfPathKeysBecomeAbsoluteAgainstTheWorkingDirectory) {
  const fs::path before = fs::current_path();
  fs::current_path(at("work"));
  Diagnostics diag;
  const std::optional<Config> c =
      Config::load(config(""),
                   {"data.paths=0.3 a 0.7 /abs/b", "checkpoint.load=auto", "checkpoint.dir=ckpt", "tuner.cluster=dgx_h100",
                    "output.metrics=m/x.jsonl", "data.tokenizer=byte"},
                   diag);
  fs::current_path(before);
  ASSERT_TRUE(c.has_value()) << diag.report();
  const auto value = [&](const char* key) { return c->root().at_path(key).value_or(std::string()); };
  const std::string work = fs::path(at("work")).lexically_normal().string();
  EXPECT_EQ(value("data.paths"), "0.3 " + work + "/a 0.7 /abs/b");
  EXPECT_EQ(value("checkpoint.load"), "auto");
  EXPECT_EQ(value("checkpoint.dir"), work + "/ckpt");
  EXPECT_EQ(value("tuner.cluster"), "dgx_h100");
  EXPECT_EQ(value("output.metrics"), work + "/m/x.jsonl");
  EXPECT_EQ(value("data.tokenizer"), "byte");
  EXPECT_EQ(c->resolve(value("checkpoint.dir")), fs::path(work + "/ckpt"));
}

}  // namespace
}  // namespace mh::host::testing
