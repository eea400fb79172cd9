// Input a careless or hostile user gives: what no ordinary config looks like
// (nesting 40,000 deep, a directory or a FIFO as the config, NaN), and keys
// that would be silently ignored. Each is refused before anything runs, with
// exit status 2, the place and the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config_file_test.hpp"

namespace mh::host::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class HostileInput : public ConfigFileTest {
 protected:
  static void expect_refused(const Outcome& o, int problems) {
    EXPECT_EQ(o.status, 2) << o.err;
    EXPECT_THAT(o.err, HasSubstr(std::to_string(problems) + " problem(s); nothing was run\n"));
  }
  static std::string dotted(size_t parts) {
    std::string key = "a";
    for (size_t i = 1; i < parts; ++i) key += ".a";
    return key;
  }
};

TEST_F(HostileInput, TablesNestedFortyThousandDeepAreRefusedBeforeParsing) {
  Outcome o = run("[model]\nlayers = 2\n[" + dotted(40000) + "]\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":3:"));
  EXPECT_THAT(o.err, HasSubstr("nested more than 100 levels deep"));
}

TEST_F(HostileInput, DottedKeyOfFortyThousandPartsOnTheCommandLineIsRefused) {
  Outcome o = run("[model]\nlayers = 2\n", {dotted(40000) + "=1"});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("error: command line: override 'a.a.a"));
}

TEST_F(HostileInput, DirectoryAsTheConfigIsRefusedNotTrainedOnDefaults) {
  Outcome o = run_megahost({"--config", dir_.file("")});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("the config is a directory; --config takes a TOML file"));
}

TEST_F(HostileInput, FifoAsTheConfigIsRefusedInsteadOfWaitingOnIt) {
  ASSERT_EQ(mkfifo(dir_.file("fifo").c_str(), 0600), 0);
  Outcome o = run_megahost({"--config", dir_.file("fifo")});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("the config is a FIFO"));
}

TEST_F(HostileInput, DeviceAsTheConfigIsRefused) {
  Outcome o = run_megahost({"--config", "/dev/urandom"});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("/dev/urandom: the config is a device"));
}

TEST_F(HostileInput, MissingConfigNamesTheSystemError) {
  Outcome o = run_megahost({"--config", dir_.file("absent.toml")});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("absent.toml: cannot read the config: No such file or directory"));
}

TEST_F(HostileInput, NonFiniteNumbersAreRefusedNamingEachKey) {
  Outcome o = run("[train]\nlr = nan\nweight_decay = inf\n[model]\ninit_std = -inf\n", {"train.clip_grad=nan"});
  expect_refused(o, 4);
  EXPECT_THAT(o.err, HasSubstr("'train.lr' must be a finite number, got nan"));
  EXPECT_THAT(o.err, HasSubstr("'train.weight_decay' must be a finite number, got inf"));
  EXPECT_THAT(o.err, HasSubstr("'model.init_std' must be a finite number, got -inf"));
  EXPECT_THAT(o.err, HasSubstr("command line: 'train.clip_grad' must be a finite number"));
}

TEST_F(HostileInput, NonFiniteNumberInAPluginsSectionIsRefused) {
  Outcome o = run("[comm]\ntimeout_s = inf\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("'comm.timeout_s' must be a finite number, got inf"));
}

TEST_F(HostileInput, TimeoutBeyondTheClocksRangeIsRefusedNotWrappedToThePast) {
  Outcome o = run("[comm]\ntimeout_s = 1e10\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("'comm.timeout_s' must be <= 604800, got 1e+10"));
}

TEST_F(HostileInput, SizesWhoseProductOverflowsAreRefusedNamingTheValues) {
  Outcome o = run("[model]\nhidden = 100000\nheads = 100000\nseq_len = 10000000\n", {"--dry_run"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("error: " + config_ + ": train.micro_batch = 8, model.heads = 100000, model.seq_len = "
                               "10000000: the attention scores of one layer would take more than 2^63 bytes"));
}

TEST_F(HostileInput, ParallelSizeWrittenAsAKeyOfParallelIsRefusedNotIgnored) {
  Outcome o = run("[parallel]\ntensor = 2\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":2:10: 'parallel.tensor' must be a section, e.g. [parallel.tensor] size = "));
}

// mpirun tells each process its world through the environment; megahost
// sees the same variable here as under `mpirun -np 2`.
TEST_F(HostileInput, ThreadsCommUnderAnMpiLauncherIsRefusedNamingTheCommToUse) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  Outcome o = run("[comm]\nplugin = \"threads\"\n");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":2:10: comm.plugin is 'threads', but an MPI launcher started this process "
                                         "as one of 2 (OMPI_COMM_WORLD_SIZE=2): each would train its own copy; set "
                                         "comm.plugin=mpi"));
}

TEST_F(HostileInput, LayoutProblemsAreBadInputReportedAllAtOnceWhereTheyAre) {
  Outcome o = run("[model]\nheads = 6\nhidden = 384\n"
                  "[comm]\nworld_size = 6\n"
                  "[parallel.tensor]\nsize = 4\n"
                  "[train]\nglobal_batch = 8\nmicro_batch = 3\n");
  expect_refused(o, 3);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":6:1: parallel.tensor.size = 4 does not divide model.heads = 6"));
  EXPECT_THAT(o.err, HasSubstr(config_ + ":6:1: parallel.tensor.size = 4 does not divide the world size = 6"));
  EXPECT_THAT(o.err, HasSubstr("parallel.pipeline: the microbatch count m = train.global_batch / (train.micro_batch * "
                               "data-parallel size) = 8 / (3 * 1) is not a whole number"));
}

TEST_F(HostileInput, WorldThatIsNotTensorTimesPipelineTimesDataIsBadInputAtTheComm) {
  Outcome o = run("[comm]\nworld_size = 6\n[parallel.tensor]\nsize = 2\n[parallel.pipeline]\nsize = 2\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":1:1: the world size 6 is not a multiple of parallel.tensor.size (2) x "
                                         "parallel.context.size (1) x parallel.pipeline.size (2)"));
}

TEST_F(HostileInput, ContextChunksThatDoNotDivideTheSequenceAreBadInputNamingTheKey) {
  Outcome o = run("[model]\nseq_len = 36\n[comm]\nworld_size = 4\n[parallel.context]\nsize = 4\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":5:1: parallel.context.size = 4 cuts model.seq_len = 36 into 8 chunks (2 per "
                                         "rank, load-balanced), which does not divide it; use a seq_len that is a "
                                         "multiple of 8, or a size whose 2 x size divides 36"));
}

// Ulysses gives each context rank whole sequences of 1/cp of the heads.
TEST_F(HostileInput, AllToAllContextOverHeadsItDoesNotDivideIsBadInputNamingTheKey) {
  Outcome o = run("[model]\nhidden = 48\nheads = 6\n[comm]\nworld_size = 4\n[parallel.context]\nsize = 4\n"
                  "comm_type = \"a2a\"\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(config_ + ":6:1: parallel.context.comm_type = \"a2a\" splits the key/value heads over "
                                         "parallel.context.size = 4, which does not divide model.kv_heads = 6; use "
                                         "comm_type = \"all_gather\", or a size that divides 6 (1, 2, 3, 6)"));
}

TEST_F(HostileInput, AllToAllContextOverTheHeadsOfATensorRankItDoesNotDivideSaysWhichSizesFit) {
  Outcome o = run("[model]\nhidden = 48\nheads = 6\n[comm]\nworld_size = 4\n[parallel.tensor]\nsize = 2\n"
                  "[parallel.context]\nsize = 2\ncomm_type = \"a2a\"\n");
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_THAT(o.err, HasSubstr("parallel.context.comm_type = \"a2a\" splits each tensor rank's 3 key/value head(s) "
                               "(model.kv_heads = 6 / parallel.tensor.size = 2) over parallel.context.size = 2, which "
                               "does not divide them; use comm_type = \"all_gather\", or tensor and context sizes "
                               "whose product divides 6"));
}

// 10^12 sequences of 100 tokens: no machine holds the batch's tokens.
TEST_F(HostileInput, BatchTooLargeForMemorySaysSoAndWhatToLower) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "under AddressSanitizer an impossible operator new aborts instead of throwing std::bad_alloc";
#endif
  Outcome o = run_megahost({"model.layers=2", "model.hidden=64", "model.heads=2", "model.seq_len=100", "model.vocab=384",
                            "train.global_batch=1000000000000", "train.micro_batch=1000000000000",
                            "train.eval_interval=0", "comm.world_size=1", "parallel.tensor.size=1",
                            "parallel.pipeline.size=1"});
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_THAT(o.err, HasSubstr("rank 0: out of host memory (std::bad_alloc); lower train.micro_batch"));
}

// --calibrate writes to the user's profile folder by default, never over
// the shipped profile; without HOME or XDG_CONFIG_HOME it asks for a path.
TEST_F(HostileInput, CalibrateWithoutAUserFolderAsksForCalibrateOut) {
  const std::string home = std::getenv("HOME") != nullptr ? std::getenv("HOME") : "";
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved_xdg = xdg != nullptr ? xdg : "";
  unsetenv("HOME");
  unsetenv("XDG_CONFIG_HOME");
  Outcome o = run_megahost({"--calibrate"});
  if (!home.empty()) setenv("HOME", home.c_str(), 1);
  if (xdg != nullptr) setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1);
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("error: --calibrate_out: neither XDG_CONFIG_HOME nor HOME is set"));
}

// A rank allowed 1 MiB: the run stops at the allocation that would pass it,
// naming both numbers, instead of allocating until the OS kills it.
TEST_F(HostileInput, RunNeedingMoreMemoryThanTheDeviceHasStopsNamingBothNumbers) {
  std::vector<std::string> args = tiny_run();
  for (const char* o : {"comm.world_size=1", "parallel.tensor.size=1", "parallel.pipeline.size=1",
                        "kernels.memory_gb=0.0009765625", "kernels.peak_gflops=1", "train.steps=1"})
    args.push_back(o);
  Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 1) << o.err;
  // Before step 1, from the dry run's exact plan, not at the allocation
  // that crosses the limit.
  EXPECT_THAT(o.err, HasSubstr("rank 0: before step 1, nothing allocated: the dry run plans 2.61 MiB for this rank at "
                               "its peak (params 0.48 MiB, grads 0.48 MiB, optimizer 0.97 MiB, activations 0.65 MiB, "
                               "workspace 0.11 MiB)"));
  EXPECT_THAT(o.err, HasSubstr("more than the 1.00 MiB its device has (cpu: "));
  EXPECT_THAT(o.err, HasSubstr("see every rank's plan with --dry_run"));
  EXPECT_THAT(o.err, HasSubstr("kernels.memory_gb sets the memory a rank may use (the override)"));
  EXPECT_THAT(o.err, Not(HasSubstr("step 1/1")));
}

// The override: a rank allowed what the plan needs (2.61 MiB) starts and
// trains; its allocations, checked as they are made, stay within the plan.
TEST_F(HostileInput, RunWhosePlanFitsTheMemoryGivenWithMemoryGbTrains) {
  std::vector<std::string> args = tiny_run();
  for (const char* o : {"comm.world_size=1", "parallel.tensor.size=1", "parallel.pipeline.size=1",
                        "kernels.memory_gb=0.0026", "kernels.peak_gflops=1", "train.steps=2"})
    args.push_back(o);
  Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 0) << o.err;
}

// Each cpu rank used to measure its peak FLOP/s with a 1024^3 sgemm, all at
// once: 256 ranks on a small machine took longer than comm.timeout_s (the
// world split timed out) and 1024 held tens of GB. One measurement serves all.
TEST(ManyRanks, TwoHundredFiftySixThreadRanksStartAndTrainAStep) {
  Outcome o = run_megahost({"model.layers=1", "model.hidden=32", "model.heads=2", "model.seq_len=16",
                            "train.global_batch=256", "train.micro_batch=1", "train.eval_interval=0", "train.steps=1",
                            "comm.world_size=256", "parallel.tensor.size=1", "parallel.pipeline.size=1",
                            std::string("data.path=") + MEGAHOST_TEST_DATA});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("on 256 rank(s)"));
}

TEST(CommandLine, UnknownFlagIsBadInputNamingTheClosestFlag) {
  Outcome o = run_megahost({"--metrics_uot=m.jsonl"});
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.err, HasSubstr("error: command line: unknown flag '--metrics_uot=m.jsonl'; did you mean 'metrics_out'?"));
  EXPECT_THAT(o.err, HasSubstr("1 problem(s); nothing was run"));
}

TEST(CommandLine, HelpShowsMegahostsOwnFlagsAndNotTheLoggingLibrarys) {
  Outcome o = run_megahost({"--help"});
  EXPECT_EQ(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("-config"));
  EXPECT_THAT(o.out, HasSubstr("-metrics_out"));
  EXPECT_THAT(o.out, HasSubstr("megahost --helpfull"));
  EXPECT_THAT(o.out + o.err, Not(HasSubstr("-log_dir")));
}

}  // namespace
}  // namespace mh::host::testing
