// The files a run writes never destroy what the user has: an output that is
// one of the run's inputs, or lies in a missing folder, is refused before
// step 1; metrics are appended under a run header, locked while written,
// never torn, and never mixed with log lines.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/temp_dir.hpp"
#include "megahost_process.hpp"
#include "support/files.hpp"

namespace mh::host::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Each line of a metrics file parsed; fails the test on a line that is not
// one whole JSON record.
std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(mh::test::file_bytes(path));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not a whole record: '" << line << "'";
    out.push_back(j);
  }
  return out;
}

class OutputFiles : public ::testing::Test {
 protected:
  // A private copy of the shipped dataset, so a failure cannot harm it.
  std::string copy_dataset() {
    for (const char* ext : {".bin", ".idx"})
      fs::copy_file(std::string(MEGAHOST_TEST_DATA) + ext, dir_.file(std::string("corpus") + ext));
    return dir_.file("corpus");
  }
  std::vector<std::string> tiny(std::vector<std::string> extra) {
    std::vector<std::string> args = tiny_run();
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // megahost through the shell, for what posix_spawn does not set up
  // (closed streams, resource limits); its output comes back through a pipe,
  // which no file-size limit applies to.
  Outcome shell(const std::string& prefix, const std::vector<std::string>& args) {
    std::string cmd = "exec 2>&1; " + prefix + " exec " + std::string(MEGAHOST_TEST_BINARY);
    for (const auto& a : args) cmd += " '" + a + "'";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    Outcome o;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) o.err.append(buffer, n);
    int status = ::pclose(pipe);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return o;
  }

  mh::data::testing::TempDir dir_;
};

TEST_F(OutputFiles, MetricsOutThatIsTheDatasetsBinIsRefusedAndTheDatasetIsUntouched) {
  const std::string prefix = copy_dataset();
  const auto size = fs::file_size(prefix + ".bin");
  Outcome o = run_megahost(tiny({"data.path=" + prefix, "--metrics_out", prefix + ".bin"}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("error: --metrics_out: --metrics_out '" + prefix +
                               ".bin' is one of the run's inputs (" + prefix + ".bin, read as data.path); writing it would destroy it"));
  EXPECT_EQ(fs::file_size(prefix + ".bin"), size);
}

TEST_F(OutputFiles, GradsOutThatIsTheConfigIsRefusedAndTheConfigIsUntouched) {
  const std::string config = dir_.write("run.toml", "[train]\nsteps = 1\n");
  Outcome o = run_megahost(tiny({"--config", config, "--grads_out", config}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("--grads_out '" + config + "' is one of the run's inputs"));
  EXPECT_EQ(mh::test::file_bytes(config), "[train]\nsteps = 1\n");
}

TEST_F(OutputFiles, MetricsOutThatIsABlendMembersIndexIsRefusedAndTheDatasetIsUntouched) {
  const std::string prefix = copy_dataset();
  const auto size = fs::file_size(prefix + ".idx");
  Outcome o = run_megahost(tiny({"data.paths=0.5 " + std::string(MEGAHOST_TEST_DATA) + " 0.5 " + prefix,
                                 "--metrics_out", prefix + ".idx"}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("is one of the run's inputs (" + prefix + ".idx, read as data.paths)"));
  EXPECT_EQ(fs::file_size(prefix + ".idx"), size);
}

TEST_F(OutputFiles, GradsOutThatIsAValidationListMemberIsRefused) {
  const std::string prefix = copy_dataset();
  Outcome o = run_megahost(tiny({"data.train_paths=" + std::string(MEGAHOST_TEST_DATA), "data.valid_paths=" + prefix,
                                 "--grads_out", prefix + ".bin"}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("read as data.valid_paths"));
}

// A checkpoint being loaded: named by checkpoint.load, or found by "auto"
// in checkpoint.dir. Its metadata.json and rank files stay whole.
TEST_F(OutputFiles, OutputsOverTheCheckpointBeingLoadedAreRefusedAndItStaysWhole) {
  const std::string ckpt = dir_.file("ckpt");
  ASSERT_EQ(run_megahost(tiny({"train.steps=1", "checkpoint.dir=" + ckpt})).status, 0);
  const std::string step = ckpt + "/step_000000001";
  const std::string metadata = mh::test::file_bytes(step + "/metadata.json"), rank = mh::test::file_bytes(step + "/rank_00000.safetensors");
  Outcome named = run_megahost(tiny({"train.steps=2", "checkpoint.load=" + step, "--metrics_out", step + "/metadata.json"}));
  EXPECT_EQ(named.status, 2) << named.err;
  EXPECT_THAT(named.err, HasSubstr("read as checkpoint.load); writing it would destroy it"));
  Outcome automatic = run_megahost(tiny({"train.steps=2", "checkpoint.dir=" + ckpt, "checkpoint.load=auto", "--grads_out",
                                         step + "/rank_00000.safetensors"}));
  EXPECT_EQ(automatic.status, 2) << automatic.err;
  EXPECT_THAT(automatic.err, HasSubstr("read as checkpoint.dir); writing it would destroy it"));
  Outcome latest = run_megahost(tiny({"train.steps=2", "checkpoint.dir=" + ckpt, "--metrics_out", ckpt + "/latest"}));
  EXPECT_EQ(latest.status, 2) << latest.err;
  EXPECT_EQ(mh::test::file_bytes(step + "/metadata.json"), metadata);
  EXPECT_EQ(mh::test::file_bytes(step + "/rank_00000.safetensors"), rank);
}

TEST_F(OutputFiles, MetricsOutThatIsThePromptsFileIsRefusedAndThePromptsStay) {
  const std::string prompts = dir_.write("prompts.txt", "Once upon\n");
  const std::string config = dir_.write("gen.toml", "[generate]\nprompts_file = \"prompts.txt\"\nmax_new_tokens = 2\n");
  Outcome o = run_megahost(tiny({"--config", config, "--metrics_out", prompts}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("read as generate.prompts_file)"));
  EXPECT_EQ(mh::test::file_bytes(prompts), "Once upon\n");
}

TEST_F(OutputFiles, GradsOutThatIsTheTokenizerFileIsRefused) {
  const std::string tokenizer = dir_.write("tokenizer.json", "{}");
  Outcome o = run_megahost(tiny({"data.tokenizer=huggingface", "data.tokenizer_file=" + tokenizer, "--grads_out", tokenizer}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("read as data.tokenizer_file)"));
  EXPECT_EQ(mh::test::file_bytes(tokenizer), "{}");
}

TEST_F(OutputFiles, GradsOutInAMissingFolderIsRefusedBeforeStepOneWithTheSystemsReason) {
  Outcome o = run_megahost(tiny({"train.steps=1", "--grads_out", dir_.file("missing/grads.bin")}));
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("cannot write in folder '" + dir_.file("missing") +
                               "': No such file or directory; create it or choose another path"));
  EXPECT_THAT(o.err, ::testing::Not(HasSubstr("step 1/")));
}

TEST_F(OutputFiles, ExistingMetricsFileIsAppendedToUnderARunHeaderNotOverwritten) {
  const std::string metrics = dir_.write("m.jsonl", "{\"step\":1,\"loss\":9}\n");
  Outcome o = run_megahost(tiny({"train.steps=1", "--metrics_out", metrics}));
  ASSERT_EQ(o.status, 0) << o.err;
  std::vector<nlohmann::json> r = records(metrics);
  ASSERT_GE(r.size(), 3u);
  EXPECT_EQ(r[0]["loss"], 9);
  EXPECT_TRUE(r[1].contains("run"));
  EXPECT_EQ(r[2]["step"], 1);
}

TEST_F(OutputFiles, MetricsFileLockedByAnotherRunIsRefusedAndKeepsItsRecords) {
  const std::string metrics = dir_.write("m.jsonl", "{\"step\":1}\n");
  int fd = ::open(metrics.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  Outcome o = run_megahost(tiny({"train.steps=1", "--metrics_out", metrics}));
  ::close(fd);
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("metrics file '" + metrics + "' is locked by another run writing it"));
  EXPECT_EQ(mh::test::file_bytes(metrics), "{\"step\":1}\n");
}

// A file-size limit (ulimit -f, SIGXFSZ ignored) fails a write part-way,
// as a full disk does.
TEST_F(OutputFiles, MetricsOnAFullDiskHoldWholeRecordsOnly) {
  const std::string metrics = dir_.file("m.jsonl");
  Outcome o = shell("trap '' XFSZ; ulimit -f 4;", tiny({"train.steps=40", "--metrics_out", metrics}));
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_THAT(o.err, HasSubstr("writing metrics to '" + metrics + "' failed: File too large"));
  EXPECT_GT(records(metrics).size(), 1u);
}

TEST_F(OutputFiles, LogLinesStayOutOfTheMetricsFileWhenStderrIsClosed) {
  const std::string metrics = dir_.file("m.jsonl");
  Outcome o = shell("exec 2>&-;", tiny({"train.steps=2", "--metrics_out", metrics}));
  EXPECT_EQ(o.status, 0);
  for (const auto& r : records(metrics)) EXPECT_TRUE(r.is_object());
}

}  // namespace
}  // namespace mh::host::testing
