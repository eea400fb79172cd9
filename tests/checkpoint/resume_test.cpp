// Resume is bit-exact: a run interrupted at any moment — kill -9 mid-run,
// kill -9 at each point of a save, SIGTERM — and resumed with
// checkpoint.load = "auto" gives the uninterrupted run's loss at every step
// and its final weights and optimizer state, bit for bit. The layout has
// tensor and sequence parallelism, the distributed optimizer, gradient
// accumulation, dropout, data shuffling, warm-up and cosine decay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/store.hpp"
#include "megahost_run.hpp"

namespace mh::ckpt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::vector<std::string> kLayout = {"comm.world_size=4", "parallel.tensor.size=2",
                                          "parallel.tensor.sequence_parallel=true",
                                          "parallel.data.distributed_optimizer=true", "train.steps=8"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The uninterrupted run, saving once at its end into `dir`.
Outcome reference(const std::string& dir, const std::vector<std::string>& extra = {}) {
  Outcome r = run_megahost(with(with(kLayout, extra), {"checkpoint.dir=" + dir}));
  EXPECT_EQ(r.status, 0) << r.log;
  EXPECT_EQ(r.losses.size(), 8u) << r.log;
  return r;
}

std::string newest(const std::string& dir) {
  auto all = complete_checkpoints(dir);
  return all.empty() ? "" : fs::path(all.back()).filename().string();
}

// Resumes from `dir` to the end and checks every step it runs, and the
// final checkpoint, against the reference.
void expect_resume_matches(const std::string& dir, const Outcome& ref, const std::string& ref_dir,
                           const std::vector<std::string>& extra = {}) {
  const std::string from = newest(dir);
  Outcome resumed = run_megahost(with(with(kLayout, extra), {"checkpoint.dir=" + dir, "checkpoint.load=auto"}));
  ASSERT_EQ(resumed.status, 0) << resumed.log;
  EXPECT_THAT(resumed.log, HasSubstr("resumed from " + dir + "/" + from));
  ASSERT_FALSE(resumed.losses.empty());
  EXPECT_EQ(resumed.losses.rbegin()->first, 8);
  for (const auto& [step, loss] : resumed.losses) EXPECT_EQ(loss, ref.losses.at(step)) << "step " << step;
  EXPECT_TRUE(rank_files(dir + "/step_000000008") == rank_files(ref_dir + "/step_000000008"))
      << "final weights or optimizer state differ";
}

class ResumeAfterKill : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeAfterKill, MidRunIsBitExact) {
  const std::vector<std::string> dtype = {std::string("kernels.dtype=") + GetParam()};
  const std::string ref_dir = scratch_dir("ref"), dir = scratch_dir("killed");
  const Outcome ref = reference(ref_dir, dtype);
  Outcome killed = run_megahost(with(with(kLayout, dtype), {"checkpoint.dir=" + dir, "checkpoint.interval=2"}),
                            Interrupt{SIGKILL, 5, ""});
  ASSERT_EQ(killed.signal, SIGKILL) << killed.log;
  ASSERT_NE(newest(dir), "") << "no checkpoint before the kill";
  expect_resume_matches(dir, ref, ref_dir, dtype);
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResumeAfterKill, ::testing::Values("fp32", "bf16"));

struct SaveKill {
  const char* failpoint;
  const char* survivor;  // the newest complete checkpoint after the kill
};

void PrintTo(const SaveKill& k, std::ostream* os) { *os << k.failpoint; }

class ResumeAfterKillMidSave : public ::testing::TestWithParam<SaveKill> {};

// The second save (step 4) is killed; four thread ranks each write a file,
// so the fifth file written is the second save's first.
TEST_P(ResumeAfterKillMidSave, KeepsThePreviousCheckpointAndIsBitExact) {
  const std::string ref_dir = scratch_dir("ref"), dir = scratch_dir("killed");
  const Outcome ref = reference(ref_dir);
  Outcome killed = run_megahost(with(kLayout, {"checkpoint.dir=" + dir, "checkpoint.interval=2"}),
                            Interrupt{0, 0, GetParam().failpoint});
  ASSERT_EQ(killed.signal, SIGKILL) << killed.log;
  EXPECT_EQ(newest(dir), GetParam().survivor);
  expect_resume_matches(dir, ref, ref_dir);
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Points, ResumeAfterKillMidSave,
                         ::testing::Values(SaveKill{"checkpoint.rank_file_written:5", "step_000000002"},
                                           SaveKill{"checkpoint.before_rename:2", "step_000000002"},
                                           SaveKill{"checkpoint.before_latest:2", "step_000000004"}),
                         [](const auto& info) { return std::string(info.index == 0 ? "rank_file_written"
                                                                   : info.index == 1 ? "before_rename"
                                                                                     : "before_latest"); });

TEST(StopSignal, FinishesTheStepSavesAndExitsResumable) {
  const std::string ref_dir = scratch_dir("ref"), dir = scratch_dir("stopped");
  const Outcome ref = reference(ref_dir);
  Outcome stopped = run_megahost(with(kLayout, {"checkpoint.dir=" + dir}), Interrupt{SIGTERM, 3, ""});
  ASSERT_EQ(stopped.status, 75) << stopped.log;
  EXPECT_THAT(stopped.log, HasSubstr("received SIGTERM: stopping after step"));
  const int64_t last = stopped.losses.rbegin()->first;
  ASSERT_LT(last, 8) << "the run ended before the signal arrived";
  EXPECT_EQ(newest(dir), step_name(last));
  EXPECT_THAT(stopped.records.back(), HasSubstr("\"final\":true"));
  EXPECT_THAT(stopped.records[stopped.records.size() - 2], HasSubstr("\"stopped\":\"SIGTERM\""));
  expect_resume_matches(dir, ref, ref_dir);
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
}

// SIGTERM to mpirun (Open MPI 4.1) reaches the ranks as SIGCONT, then
// SIGTERM a second later, then SIGKILL a second after that, and mpirun exits
// 1 whatever they do: a step and a save longer than that second are lost.
// SIGUSR1 it forwards to every rank and then exits with their status.
TEST(StopSignal, Usr1ToMpiexecStopsEveryRankSavedAndMpiexecExitsResumable) {
  const std::string dir = scratch_dir("usr1_mpiexec");
  const std::vector<std::string> run = {"comm.plugin=mpi", "train.steps=200", "checkpoint.dir=" + dir};
  Outcome stopped = run_megahost(run, Interrupt{SIGUSR1, 3, ""}, {MEGAHOST_TEST_MPIEXEC, "-n", "2"});
  ASSERT_EQ(stopped.status, 75) << stopped.log;
  EXPECT_THAT(stopped.log, HasSubstr("received SIGUSR1: stopping after step"));
  const int64_t last = stopped.losses.rbegin()->first;
  ASSERT_LT(last, 200) << "the run ended before the signal arrived";
  EXPECT_EQ(newest(dir), step_name(last));
  EXPECT_THAT(stopped.records[stopped.records.size() - 2], HasSubstr("\"stopped\":\"SIGUSR1\""));
  Outcome resumed = run_megahost({"comm.plugin=mpi", "train.steps=" + std::to_string(last + 2), "checkpoint.dir=" + dir,
                                  "checkpoint.load=auto"},
                                 {}, {MEGAHOST_TEST_MPIEXEC, "-n", "2"});
  EXPECT_EQ(resumed.status, 0) << resumed.log;
  EXPECT_EQ(resumed.losses.begin()->first, last + 1);
  fs::remove_all(dir);
}

TEST(AsyncSave, WritesWhatASynchronousSaveWritesAndResumesBitExact) {
  const std::string ref_dir = scratch_dir("ref"), dir = scratch_dir("async");
  const Outcome ref = reference(ref_dir);
  Outcome async = run_megahost(with(kLayout, {"checkpoint.dir=" + dir, "checkpoint.interval=2", "checkpoint.async=true"}));
  ASSERT_EQ(async.status, 0) << async.log;
  EXPECT_THAT(async.log, HasSubstr("written in the background"));
  EXPECT_TRUE(rank_files(dir + "/step_000000008") == rank_files(ref_dir + "/step_000000008"));
  // Back to step 4 and on from there.
  for (const char* later : {"step_000000006", "step_000000008"}) fs::remove_all(dir + "/" + later);
  expect_resume_matches(dir, ref, ref_dir);
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
}

TEST(Keep, LeavesTheNewestCheckpointsAndTheLatestMarker) {
  const std::string dir = scratch_dir("keep");
  Outcome r = run_megahost({"train.steps=5", "checkpoint.dir=" + dir, "checkpoint.interval=1", "checkpoint.keep=2"});
  ASSERT_EQ(r.status, 0) << r.log;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "megahost.lock", "megahost_run.json", "step_000000004",
                                             "step_000000005"}));
  std::ifstream latest(dir + "/latest");
  std::string text;
  latest >> text;
  EXPECT_EQ(text, "step_000000005");
  fs::remove_all(dir);
}

TEST(Resume, AutoWithNothingSavedYetStartsFresh) {
  const std::string dir = scratch_dir("fresh");
  Outcome r = run_megahost({"train.steps=2", "checkpoint.dir=" + dir, "checkpoint.load=auto"});
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("starting fresh"));
  EXPECT_EQ(r.losses.begin()->first, 1);
  fs::remove_all(dir);
}

TEST(Resume, ChangedGlobalBatchSaysWhereTheDataOrderContinues) {
  const std::string dir = scratch_dir("batch");
  ASSERT_EQ(run_megahost({"train.steps=2", "checkpoint.dir=" + dir}).status, 0);
  Outcome r = run_megahost({"train.steps=3", "train.global_batch=16", "checkpoint.load=" + dir});
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("train.global_batch changed from 8 to 16: the data order continues at sample 16"));
  EXPECT_EQ(r.losses.size(), 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mh::ckpt::test

namespace mh::ckpt::test {
namespace {

int64_t dry_run_checkpoint_bytes(const std::vector<std::string>& layout, const std::string& dir) {
  Outcome r = run_megahost(with(layout, {"--dry_run", "checkpoint.dir=" + dir}));
  EXPECT_EQ(r.status, 0) << r.log;
  int64_t total = 0;
  const nlohmann::json final_record = nlohmann::json::parse(r.records.back());
  for (const auto& rank : final_record.at("memory")) total += rank.at("checkpoint_bytes").get<int64_t>();
  EXPECT_FALSE(fs::exists(dir)) << "a dry run wrote a checkpoint";
  return total;
}

// Every element written once: the ranks' bytes add up to the global
// weights and both AdamW moments in f32 (226,688 parameters) on any layout.
TEST(DryRun, CheckpointBytesAddUpToTheModelOnAnyLayout) {
  const std::string dir = scratch_dir("dry") + "/never";
  const int64_t expected = 226688LL * 3 * 4;
  EXPECT_EQ(dry_run_checkpoint_bytes({"comm.world_size=1"}, dir), expected);
  EXPECT_EQ(dry_run_checkpoint_bytes({"comm.world_size=8", "parallel.tensor.size=2", "parallel.pipeline.size=2",
                                      "parallel.data.distributed_optimizer=true"},
                                     dir),
            expected);
}

TEST(DryRun, AsyncStagingBufferIsInTheMemoryPeaks) {
  const std::string dir = scratch_dir("dry_async") + "/never";
  Outcome r = run_megahost({"--dry_run", "checkpoint.dir=" + dir, "checkpoint.async=true"});
  ASSERT_EQ(r.status, 0) << r.log;
  const nlohmann::json rank0 = nlohmann::json::parse(r.records.back()).at("memory").at(0);
  EXPECT_GT(rank0["checkpoint_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(rank0["checkpoint"].get<int64_t>(), rank0["checkpoint_bytes"].get<int64_t>());
  EXPECT_THAT(r.log, HasSubstr("ckpt stg"));
}

}  // namespace
}  // namespace mh::ckpt::test
