// A loss mask gives every layout one rank's function: the loss is averaged
// over the global batch's trained targets, which data-parallel replicas
// count unevenly, so only a global count keeps their gradients one rank's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "layout_run.hpp"
#include "support/process.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

// 300 prompt/completion lines whose prompts and completions vary in length,
// so micro-batches hold different numbers of trained targets.
struct SftDataset {
  fs::path dir = fs::temp_directory_path() / ("megahost_masked_loss_" + std::to_string(getpid()));
  std::string prefix = (dir / "sft").string();
  SftDataset() {
    fs::create_directories(dir);
    std::ofstream lines(dir / "sft.jsonl");
    for (int d = 0; d < 300; ++d) {
      const std::string prompt(size_t(5 + d * 7 % 40), char('a' + d % 26));
      const std::string completion(size_t(3 + d * 11 % 30), char('A' + d % 26));
      lines << "{\"prompt\": \"Q" << d << ": " << prompt << "\", \"completion\": \" " << completion << "\"}\n";
    }
    lines.close();
    ProcessSpec prepare;
    prepare.argv = {MEGAHOST_PREPARE_BINARY, "--format", "sft", "--input", (dir / "sft.jsonl").string(),
                    "--output_prefix", prefix};
    const ProcessExit exit = run_process(prepare);
    EXPECT_EQ(exit.status, 0) << exit.err;
  }
  ~SftDataset() { fs::remove_all(dir); }
};

TEST(MaskedLoss, EveryLayoutComputesOneRanksMaskedLossAndGradients) {
  const SftDataset data;
  const std::string path = "data.path=" + data.prefix + " ";
  const LayoutResult one = run_layout(path + "comm.world_size=1");
  ASSERT_EQ(one.exit_code, 0) << one.log;
  ASSERT_EQ(one.losses.size(), 5u) << one.metrics;
  ASSERT_FALSE(one.grads.empty()) << one.log;
  for (const char* layout :
       {"comm.world_size=2", "comm.world_size=4 parallel.tensor.size=2 parallel.pipeline.size=2",
        "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true",
        "comm.world_size=4 parallel.context.size=2"}) {
    SCOPED_TRACE(layout);
    expect_same_function(one, run_layout(path + layout), true);
  }
  // Without its mask the same tokens train on every target: another loss.
  fs::rename(data.prefix + "_loss_mask.idx", data.prefix + "_unused.idx");
  const LayoutResult unmasked = run_layout(path + "comm.world_size=1");
  ASSERT_EQ(unmasked.exit_code, 0) << unmasked.log;
  EXPECT_NE(unmasked.losses, one.losses) << "the mask changed nothing";
}

}  // namespace
}  // namespace mh::test
