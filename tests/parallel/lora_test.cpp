// LoRA on a frozen base (docs/finetune.md): adapters that contribute
// nothing (alpha = 0, or B still at zero with lr = 0) leave the base
// model's losses exactly; trained adapters learn with the optimizer state
// of the adapters alone; an adapter-only checkpoint names its base and
// resumes as the uninterrupted run; dropout on the adapters' input changes
// training but not evaluation; and every layout, with that dropout on,
// computes one rank's function (losses within 1e-5 relative, adapter
// gradients within 1e-4, as the layout-equivalence tests hold layouts to).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "layout_run.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

// Every linear layer of a Llama-shaped layer, SwiGLU's gate included.
constexpr const char* kLora = " model.arch=llama model.kv_heads=2 peft.method=lora peft.rank=4 peft.alpha=8";
// lr 0 throughout: warm-up from 0 and a cosine decay to min_lr = 0.
constexpr const char* kFrozen = " train.lr=0 train.min_lr=0";
// Dropout on, so the masks are checked beside the adapters.
constexpr const char* kDropout = " model.dropout=0.1 model.attention_dropout=0.1";
// Dropout on the adapters' input (peft.dropout).
constexpr const char* kLoraDropout = " peft.dropout=0.1";

const LayoutResult& base_with_lr_zero() {
  static const LayoutResult r = run_layout(std::string("comm.world_size=1 model.arch=llama model.kv_heads=2") +
                                           kFrozen + kDropout);
  return r;
}

// The adapters' sum scale * (x A^T) B^T is exactly zero, so each loss is the
// base's bit for bit: one tolerance of 1e-6 relative stands for equality
// through the metrics file's decimal printing.
void expect_base_losses(const LayoutResult& lora) {
  const LayoutResult& base = base_with_lr_zero();
  ASSERT_EQ(base.exit_code, 0) << base.log;
  ASSERT_EQ(lora.exit_code, 0) << lora.log;
  ASSERT_EQ(lora.losses.size(), base.losses.size()) << lora.log;
  for (size_t i = 0; i < base.losses.size(); ++i)
    EXPECT_NEAR(lora.losses[i], base.losses[i], 1e-6 * std::fabs(base.losses[i])) << "step " << i + 1;
}

TEST(Lora, AlphaZeroGivesTheBaseLosses) {
  expect_base_losses(run_layout(std::string("comm.world_size=1 train.lr=3e-3") + kLora + " peft.alpha=0" + kDropout));
}

// In bf16 the frozen base is held in bf16 alone (no f32 masters): the same
// rounding of the initial weights as the base run's GEMM copy.
TEST(Lora, AlphaZeroGivesTheBaseLossesInBf16) {
  const LayoutResult base = run_layout(std::string("comm.world_size=1 model.arch=llama model.kv_heads=2 "
                                                   "kernels.dtype=bf16") + kFrozen + kDropout);
  const LayoutResult lora = run_layout(std::string("comm.world_size=1 train.lr=3e-3 kernels.dtype=bf16") + kLora +
                                       " peft.alpha=0" + kDropout);
  ASSERT_EQ(base.exit_code, 0) << base.log;
  ASSERT_EQ(lora.exit_code, 0) << lora.log;
  ASSERT_EQ(lora.losses.size(), base.losses.size());
  for (size_t i = 0; i < base.losses.size(); ++i)
    EXPECT_NEAR(lora.losses[i], base.losses[i], 1e-6 * std::fabs(base.losses[i])) << "step " << i + 1;
}

TEST(Lora, LrZeroGivesTheBaseLosses) {
  expect_base_losses(run_layout(std::string("comm.world_size=1") + kLora + kFrozen + kDropout));
}

// Trained, the adapters move the loss; the base stays frozen, so the
// optimizer holds AdamW's two moments of the adapters alone: 8 bytes per
// adapter element, against every weight's without LoRA.
TEST(Lora, TrainsOnlyTheAdapters) {
  const LayoutResult lora = run_layout(std::string("comm.world_size=1 train.lr=3e-3") + kLora + kDropout);
  const LayoutResult full = run_layout(std::string("comm.world_size=1 train.lr=3e-3 model.arch=llama model.kv_heads=2") + kDropout);
  ASSERT_EQ(lora.exit_code, 0) << lora.log;
  ASSERT_EQ(full.exit_code, 0) << full.log;
  const LayoutResult& base = base_with_lr_zero();
  ASSERT_EQ(lora.losses.size(), base.losses.size());
  EXPECT_NE(lora.losses.back(), base.losses.back());
  // 4 layers, h = 64, 4 heads of 16, 2 kv heads (QKV 128 wide), SwiGLU f = 256; rank 4.
  const double per_layer = 4 * ((64 + 128) + (64 + 64) + 2 * (64 + 256) + (256 + 64));
  EXPECT_EQ(lora.memory.optimizer.at(0), 8 * 4 * per_layer);
  EXPECT_EQ(lora.grads.size(), size_t(4 * 5 * 2)) << "only the adapters have gradients";
  EXPECT_LT(lora.memory.grads.at(0), 0.1 * full.memory.grads.at(0));
}

// An adapter-only checkpoint saved after 3 steps resumes to the losses of
// 6 uninterrupted steps; it names its base and holds no base weight.
TEST(Lora, AdapterCheckpointResumes) {
  const fs::path dir = fs::temp_directory_path() / ("megahost_lora_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string run = std::string("comm.world_size=1 train.lr=3e-3 train.decay_steps=6") + kLora + kDropout;
  const LayoutResult six = run_layout(run + " train.steps=6");
  const LayoutResult saved = run_layout(run + " train.steps=3 checkpoint.dir=" + dir.string());
  const LayoutResult resumed = run_layout(run + " train.steps=6 checkpoint.load=" + dir.string());
  ASSERT_EQ(six.exit_code, 0) << six.log;
  ASSERT_EQ(saved.exit_code, 0) << saved.log;
  ASSERT_EQ(resumed.exit_code, 0) << resumed.log;
  std::ifstream in(dir / "step_000000003" / "metadata.json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  fs::remove_all(dir);
  EXPECT_EQ(meta["peft"]["method"], "lora");
  EXPECT_EQ(meta["peft"]["rank"], 4);
  EXPECT_TRUE(meta["peft"].contains("base"));
  for (const auto& [name, tensor] : meta["tensors"].items())
    EXPECT_NE(name.find("_lora_"), std::string::npos) << name << " is not an adapter";
  ASSERT_EQ(resumed.losses.size(), 3u) << resumed.log;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(resumed.losses[i], six.losses[i + 3], 1e-5 * std::fabs(six.losses[i + 3])) << "step " << i + 4;
}

// The loss of each --evaluate record of a run, by split.
std::map<std::string, double> evaluated_losses(const LayoutResult& r) {
  std::map<std::string, double> out;
  std::istringstream in(r.metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("evaluate")) out[j["evaluate"].get<std::string>()] = j["loss"].get<double>();
  }
  return out;
}

// peft.dropout draws its own masks: step 1, whose adapters add zero (B = 0),
// keeps dropout 0's loss and later steps differ. Evaluation draws no mask:
// the saved adapters evaluate to the same losses whatever peft.dropout says
// (1e-6 relative: equality through the metrics file's decimal printing).
TEST(Lora, DropoutChangesTrainingNotEvaluation) {
  const fs::path dir = fs::temp_directory_path() / ("megahost_lora_dropout_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string splits = " data.split=98,1,1";
  const std::string run = std::string("comm.world_size=1 train.lr=3e-3") + kLora + kDropout + splits;
  const LayoutResult off = run_layout(run + " checkpoint.dir=" + dir.string());
  const LayoutResult on = run_layout(run + kLoraDropout);
  ASSERT_EQ(off.exit_code, 0) << off.log;
  ASSERT_EQ(on.exit_code, 0) << on.log;
  ASSERT_EQ(on.losses.size(), 5u) << on.log;
  ASSERT_EQ(off.losses.size(), 5u) << off.log;
  EXPECT_NEAR(on.losses[0], off.losses[0], 1e-6 * std::fabs(off.losses[0]));
  double largest = 0;
  for (size_t i = 1; i < on.losses.size(); ++i)
    largest = std::max(largest, std::fabs(on.losses[i] - off.losses[i]) / std::fabs(off.losses[i]));
  EXPECT_GT(largest, 1e-5) << "peft.dropout=0.1 trained as dropout 0 did";

  const std::string evaluate = std::string("--evaluate comm.world_size=1") + kLora + splits + " checkpoint.load=" +
                               dir.string();
  const LayoutResult eval_off = run_layout(evaluate);
  const LayoutResult eval_on = run_layout(evaluate + " peft.dropout=0.5");
  fs::remove_all(dir);
  ASSERT_EQ(eval_off.exit_code, 0) << eval_off.log;
  ASSERT_EQ(eval_on.exit_code, 0) << eval_on.log;
  const auto want = evaluated_losses(eval_off), got = evaluated_losses(eval_on);
  ASSERT_EQ(want.size(), 2u) << eval_off.log;
  for (const auto& [split, loss] : want) EXPECT_NEAR(got.at(split), loss, 1e-6 * loss) << split;
}

struct Case {
  const char* name;
  const char* layout;
  bool compare_grads = true;  // the distributed optimizer's gradients are per-rank shards
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

class LoraSameFunctionAsOneRank : public ::testing::TestWithParam<Case> {};

TEST_P(LoraSameFunctionAsOneRank, LossesAndAdapterGradientsMatch) {
  static const LayoutResult ref =
      run_layout(std::string("comm.world_size=1 train.lr=3e-3") + kLora + kDropout + kLoraDropout);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 5u) << ref.log;
  expect_same_function(ref,
                       run_layout(std::string(GetParam().layout) + " train.lr=3e-3" + kLora + kDropout + kLoraDropout),
                       GetParam().compare_grads);
}

const Case kCases[] = {
    {"tp2", "comm.world_size=2 parallel.tensor.size=2"},
    {"tp2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"tp2_pp2_dp2", "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2"},
    // The adapters' dropout draws each context chunk's rows at their global counters.
    {"cp2_tp2_sp", "comm.world_size=4 parallel.context.size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"cp4", "comm.world_size=4 parallel.context.size=4"},
    // The distributed optimizer shards the adapters' state; the buckets overlap backward.
    {"dp2_distributed_overlapped",
     "comm.world_size=2 parallel.data.distributed_optimizer=true parallel.data.overlap_grad_reduce=true "
     "parallel.data.overlap_param_gather=true parallel.data.bucket_mb=0.01", false},
};
INSTANTIATE_TEST_SUITE_P(Layouts, LoraSameFunctionAsOneRank, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mh::test
