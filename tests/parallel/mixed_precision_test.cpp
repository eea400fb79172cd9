// Mixed precision (kernels.dtype = "bf16": bf16 activations and GEMM
// operands, f32 master weights, gradients, optimizer state, layernorm
// statistics and logits) computes what fp32 computes up to bf16 rounding,
// learns, and is a layout-independent function like fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "layout_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kBf16 = " kernels.dtype=bf16";

// Long enough for the loss to fall well below its start.
constexpr const char* kLearning = "train.steps=30 train.lr=3e-3 train.warmup_steps=5";

// The bounds below hold for any correct bf16 implementation that accumulates
// in f32, on any CPU: they count roundings instead of trusting a measurement.
//
// bf16 keeps 8 significant bits, so rounding to nearest moves a value by at
// most u = 2^-8 of itself. f32's own error (2^-24 per operation, a few
// hundred accumulations here) is below 1e-4 u and is ignored. To first order
// the relative errors injected along a path add up: an op whose input moved
// by e relative and which rounds its output once moves it by at most e + u
// (elementwise ops, layernorm and softmax of the model's non-degenerate rows,
// and GEMMs measured as relative_difference does, largest error over largest
// value). small.toml's model (4 layers) rounds each of these once per layer
// forward: layernorm, QKV, scores, softmax, context, projection + residual,
// layernorm, fc1, GeLU, fc2 + residual; plus the embedding and the final
// layernorm. Backward rounds the activation gradients as often.
constexpr double kBf16Unit = 0x1p-8;
constexpr int kLayers = 4;
constexpr int kForwardRoundings = 10 * kLayers + 2;
constexpr int kBackwardRoundings = kForwardRoundings;

// The loss at step 1 comes from the forward alone; at initialisation the
// logits are near 0 and the loss near ln(vocab), so its relative condition
// with respect to the logits (2 max|z| / loss) is below 1.
constexpr double kStepOneLossBound = kForwardRoundings * kBf16Unit;
// A gradient is the end of the forward path and the backward path.
constexpr double kGradientBound = (kForwardRoundings + kBackwardRoundings) * kBf16Unit;

// Later steps are not compared with fp32: two runs that differ by rounding
// follow trajectories that part (by how much depends on how a CPU's kernels
// round), so what is checked there is that bf16 learns.
TEST(MixedPrecision, Bf16StartsAtTheFp32LossWithinItsRoundingAndLearns) {
  LayoutResult fp32 = run_layout(kLearning);
  LayoutResult bf16 = run_layout(std::string(kLearning) + kBf16);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.log;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.log;
  ASSERT_EQ(bf16.losses.size(), 30u);
  ASSERT_EQ(fp32.losses.size(), 30u);
  EXPECT_NEAR(bf16.losses[0], fp32.losses[0], kStepOneLossBound * fp32.losses[0]);
  EXPECT_LT(fp32.losses.back(), 0.75 * fp32.losses.front());
  EXPECT_LT(bf16.losses.back(), 0.75 * bf16.losses.front());
}

TEST(MixedPrecision, OneStepGradientsMatchFp32WithinBf16Rounding) {
  LayoutResult fp32 = run_layout("train.steps=1");
  LayoutResult bf16 = run_layout(std::string("train.steps=1") + kBf16);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.log;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.log;
  ASSERT_FALSE(fp32.grads.empty());
  ASSERT_EQ(bf16.grads.size(), fp32.grads.size());
  for (const auto& [name, g] : fp32.grads) {
    ASSERT_EQ(bf16.grads.at(name).size(), g.size()) << name;
    EXPECT_LE(relative_difference(bf16.grads.at(name), g), kGradientBound) << name;
  }
}

// Pipeline stages compute exactly what one rank does: the same ops on the
// same values in the same order, so the comparison is exact (one step: the
// gradient norm that clipping scales by is summed over the stages in another
// order, so later steps differ by f32 rounding).
TEST(MixedPrecision, Bf16PipelineComputesOneRanksFunctionExactly) {
  const LayoutResult one = run_layout(std::string("comm.world_size=1 train.steps=1") + kBf16);
  const LayoutResult pp2 = run_layout(std::string("comm.world_size=2 parallel.pipeline.size=2 train.steps=1") + kBf16);
  ASSERT_EQ(one.exit_code, 0) << one.log;
  ASSERT_EQ(pp2.exit_code, 0) << pp2.log;
  EXPECT_EQ(pp2.losses, one.losses);
  ASSERT_EQ(pp2.grads.size(), one.grads.size());
  for (const auto& [name, g] : one.grads) {
    if (name != "wte") EXPECT_EQ(pp2.grads.at(name), g) << name;
  }
  // The tied embedding's gradient has two parts, the first stage's and the
  // last's (the output head), which one rank accumulates in one f32 sum and
  // two ranks add after the fact: 256 tokens' terms summed in another order,
  // within 2 * 257 * 2^-24 of their magnitude, taken as at most 4 times the
  // largest element.
  EXPECT_LE(relative_difference(pp2.grads.at("wte"), one.grads.at("wte")), 4 * 2 * 257 * 0x1p-24);
}

// Tensor (and sequence) parallelism splits the inner dimension of the
// row-parallel GEMMs (projection and fc2) forward and of the column-parallel
// ones' input gradients (QKV and fc1) backward, summing the partial products
// in f32 before rounding. Only there can a rank's value differ from one
// rank's: by the order of an f32 sum, which moves it across at most one bf16
// rounding boundary, 2u. Every other op sees the moved input and rounds as
// one rank does (the first-order argument above). One step: later ones
// follow trajectories that part.
constexpr int kSplitSumsForward = 2 * kLayers, kSplitSumsBackward = 2 * kLayers;
constexpr double kTensorParallelLossBound = kSplitSumsForward * 2 * kBf16Unit;
constexpr double kTensorParallelGradientBound = (kSplitSumsForward + kSplitSumsBackward) * 2 * kBf16Unit;

struct Layout {
  const char* name;
  const char* overrides;
};

class Bf16TensorParallelSameFunctionAsOneRank : public ::testing::TestWithParam<Layout> {};

TEST_P(Bf16TensorParallelSameFunctionAsOneRank, StepOneLossAndGradientsMatchWithinTheSplitSumsRounding) {
  static const LayoutResult ref = run_layout(std::string("comm.world_size=1 train.steps=1") + kBf16);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  LayoutResult r = run_layout(std::string(GetParam().overrides) + " train.steps=1" + kBf16);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_EQ(r.losses.size(), 1u);
  ASSERT_EQ(ref.losses.size(), 1u);
  EXPECT_NEAR(r.losses[0], ref.losses[0], kTensorParallelLossBound * ref.losses[0]);
  ASSERT_EQ(r.grads.size(), ref.grads.size());
  for (const auto& [name, g] : ref.grads)
    EXPECT_LE(relative_difference(r.grads.at(name), g), kTensorParallelGradientBound) << name;
}

const Layout kLayouts[] = {
    {"tp2", "comm.world_size=2 parallel.tensor.size=2"},
    {"tp2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
};

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16TensorParallelSameFunctionAsOneRank, ::testing::ValuesIn(kLayouts),
                         [](const auto& info) { return std::string(info.param.name); });

// The distributed optimizer keeps the f32 master weights itself, 1/d per
// rank; the all-reduce optimizer keeps them whole. Both start them as the
// bf16 parameters widened, every op reads the bf16 parameters, and AdamW is
// elementwise, so the two compute the same function bit for bit: nothing
// here depends on how a CPU's BLAS rounds. Only the gradient norm is summed
// in another order (over shards, then across ranks), so clipping, which
// scales by it, is off.
TEST(MixedPrecision, DistributedOptimizerComputesTheAllReduceOptimizersFunction) {
  const std::string dp2 = std::string("comm.world_size=2 train.clip_grad=0 ") + kLearning + kBf16;
  LayoutResult plain = run_layout(dp2);
  LayoutResult sharded = run_layout(dp2 + " parallel.data.distributed_optimizer=true");
  ASSERT_EQ(plain.exit_code, 0) << plain.log;
  ASSERT_EQ(sharded.exit_code, 0) << sharded.log;
  ASSERT_EQ(sharded.losses.size(), plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i) EXPECT_EQ(sharded.losses[i], plain.losses[i]) << "step " << i + 1;
  EXPECT_LT(sharded.losses.back(), 0.75 * sharded.losses.front());
}

// Its checkpoint holds the f32 master weights (each replica writes its
// pieces): resuming gives the uninterrupted run's losses exactly, and a
// layout that keeps whole master weights loads it too.
TEST(MixedPrecision, DistributedOptimizerCheckpointResumesExactlyAndLoadsOnOneRank) {
  const std::string dist = std::string("comm.world_size=2 parallel.data.distributed_optimizer=true train.decay_steps=6") + kBf16;
  const LayoutResult whole = run_layout(dist + " train.steps=6");
  ASSERT_EQ(whole.exit_code, 0) << whole.log;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("megahost_bf16_dist_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const LayoutResult saved = run_layout(dist + " train.steps=3 checkpoint.dir=" + dir.string());
  ASSERT_EQ(saved.exit_code, 0) << saved.log;
  const LayoutResult resumed = run_layout(dist + " train.steps=6 checkpoint.load=" + dir.string());
  const LayoutResult one = run_layout(std::string("comm.world_size=1 train.decay_steps=6 train.steps=6 checkpoint.load=") +
                                      dir.string() + kBf16);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.log;
  ASSERT_EQ(resumed.losses.size(), 3u) << resumed.log;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed.losses[i], whole.losses[i + 3]) << "step " << i + 4;
  ASSERT_EQ(one.exit_code, 0) << one.log;
  ASSERT_EQ(one.losses.size(), 3u) << one.log;
  // Step 4's loss is the loaded weights' forward on the same samples, which
  // one rank computes per micro-batch exactly as two do; only the mean over
  // the 4 micro-batches is summed in another order (in f32: 2^-24 per
  // addition). Later steps follow the all-reduced gradients' rounding.
  EXPECT_NEAR(one.losses[0], whole.losses[3], 4 * 0x1p-24 * whole.losses[3]);
}

}  // namespace
}  // namespace mh::test
