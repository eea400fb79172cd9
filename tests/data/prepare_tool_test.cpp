// megahost_prepare as a user runs it: stopped by a signal, and with more
// workers than it can start. Either way it says why, exits with its
// documented status and leaves no temporary file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/process.hpp"
#include "temp_dir.hpp"

namespace mh::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// `documents` JSONL lines, about 60 bytes each.
std::string write_corpus(const testing::TempDir& dir, int documents) {
  const std::string path = dir.file("in.jsonl");
  std::ofstream out(path);
  for (int i = 0; i < documents; ++i) out << R"({"text": "document )" << i << R"( with a few words to tokenize"})" << "\n";
  return path;
}

int entries_named(const testing::TempDir& dir, const std::string& part) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir.file("")))
    n += e.path().filename().string().find(part) != std::string::npos;
  return n;
}

// 200,000 documents take about a second to prepare (many batches): the
// signal, sent once the temporary .bin exists, lands mid-run.
TEST(PrepareTool, ASignalMidRunRemovesTheTemporariesKeepsTheOldDatasetAndExitsWithTheShellsStatus) {
  for (const int signal : {SIGINT, SIGTERM}) {
    const testing::TempDir dir;
    const std::string input = write_corpus(dir, 200000);
    dir.write("out.bin", "old bin");
    dir.write("out.idx", "old idx");
    test::ProcessSpec spec{{MEGAHOST_TEST_PREPARE, "--input=" + input, "--output_prefix=" + dir.file("out"),
                            "--workers=2"}};
    spec.interrupt = {signal, [&] { return entries_named(dir, ".tmp-") > 0; }};
    const test::ProcessExit e = test::run_process(spec);
    EXPECT_EQ(e.status, 128 + signal) << e.err;
    EXPECT_THAT(e.err, HasSubstr(std::string("received ") + (signal == SIGINT ? "SIGINT" : "SIGTERM") +
                                 " while tokenizing " + input + " after "));
    EXPECT_THAT(e.err, HasSubstr("nothing was written"));
    EXPECT_EQ(entries_named(dir, ".tmp-"), 0);
    std::ifstream bin(dir.file("out.bin"));
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(bin), {}), "old bin");
  }
}

// A stack limit of 1 TB makes every new thread's stack an allocation the
// kernel refuses: the first worker thread cannot start, as under a tight
// memory limit (which would also stop AddressSanitizer's own reservation).
TEST(PrepareTool, WorkersThatCannotStartAreAClearErrorWithoutTemporaries) {
  const testing::TempDir dir;
  const std::string input = write_corpus(dir, 100);
  const test::ProcessExit e = test::run_process(test::shell(
      "ulimit -s 1000000000 && exec '" MEGAHOST_TEST_PREPARE "' --input='" + input + "' --output_prefix='" +
      dir.file("out") + "' --workers=300"));
  EXPECT_EQ(e.status, 1) << e.err;
  EXPECT_THAT(e.err, HasSubstr("--workers 300: could start only "));
  EXPECT_THAT(e.err, HasSubstr("give --workers "));
  EXPECT_THAT(e.err, ::testing::Not(HasSubstr("terminate")));
  EXPECT_EQ(entries_named(dir, ".tmp-"), 0);
  EXPECT_FALSE(fs::exists(dir.file("out.bin")));
}

TEST(PrepareTool, MoreWorkersThanAnyMachineHasCoresIsRefused) {
  const testing::TempDir dir;
  const test::ProcessExit e = test::run_process(
      {{MEGAHOST_TEST_PREPARE, "--input=" + write_corpus(dir, 10), "--output_prefix=" + dir.file("out"),
        "--workers=100000"}});
  EXPECT_EQ(e.status, 1);
  EXPECT_THAT(e.err, HasSubstr("--workers must be 1 to 1024"));
}

}  // namespace
}  // namespace mh::data
