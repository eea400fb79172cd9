// Launching under mpirun as the README does: the shipped config runs as
// written, each rank's kernel threads are the node's cores shared by the
// ranks on it (as thread ranks share them), and a world size that is not
// mpirun's is refused naming both.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "layout_run.hpp"
#include "support/process.hpp"

namespace mh::test {
namespace {

using ::testing::HasSubstr;

// "computes on cpu: ..., 2 threads (OpenBLAS ...)" -> "2 threads".
std::string kernel_threads(const std::string& log) {
  std::smatch m;
  return std::regex_search(log, m, std::regex(R"(computes on [^\n]*?, (\d+ threads))")) ? m[1].str() : "none";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(MpiLaunch, TheReadmeLineRunsTheShippedConfigAndPrintsItsHeaderOnce) {
  ProcessSpec spec;
  spec.argv = mpi_launcher(4);
  for (const char* word : {MEGAHOST_TEST_BINARY, "--config", MEGAHOST_DEFAULT_CONFIG, "comm.plugin=mpi",
                           "train.steps=2", "train.eval_interval=0"})
    spec.argv.push_back(word);
  spec.set_env = mpi_environment();
  spec.stderr_to_stdout = true;
  const ProcessExit exit = run_process(spec);
  ASSERT_EQ(exit.status, 0) << exit.out;
  EXPECT_EQ(count(exit.out, "training 4 layers"), 1u) << exit.out;
  EXPECT_THAT(exit.out, HasSubstr("iteration        2/       2"));
}

TEST(MpiLaunch, EachRankTakesTheCoresOfTheNodeDividedByTheRanksOnItAsThreadRanksDo) {
  const LayoutResult threads = run_layout("comm.world_size=2 kernels.threads=0 train.steps=1");
  const LayoutResult mpi = run_layout("comm.plugin=mpi kernels.threads=0 train.steps=1", true, 2);
  ASSERT_EQ(threads.exit_code, 0) << threads.log;
  ASSERT_EQ(mpi.exit_code, 0) << mpi.log;
  EXPECT_NE(kernel_threads(threads.log), "none") << threads.log;
  EXPECT_EQ(kernel_threads(mpi.log), kernel_threads(threads.log)) << mpi.log;
}

TEST(MpiLaunch, TheLaunchersWorldSizeIsAcceptedAndAnotherRefusedNamingBoth) {
  const LayoutResult same = run_layout("comm.plugin=mpi comm.world_size=2 train.steps=1", true, 2);
  EXPECT_EQ(same.exit_code, 0) << same.log;
  const LayoutResult other = run_layout("comm.plugin=mpi comm.world_size=4 train.steps=1", true, 2);
  EXPECT_EQ(other.exit_code, 2) << other.log;
  EXPECT_THAT(other.log, HasSubstr("comm.world_size is 4, but the launcher started 2 rank(s)"));
}

}  // namespace
}  // namespace mh::test
