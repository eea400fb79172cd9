// model.attention_backend = "flash" (the kernels' memory-efficient attention
// op) trains the same function as the unfused core, with dropout on the
// probabilities (the op draws the dropout op's mask), on one rank and on
// parallel layouts; its activations grow linearly in s and match the
// formula the dry run and the tuner use.
#include <gtest/gtest.h>

#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kFlash = " model.attention_backend=flash";

struct Layout {
  const char* name;
  const char* overrides;
};

class FlashAttention : public ::testing::TestWithParam<Layout> {};

// Same losses (1e-5 relative) and gradients (1e-4) as the unfused core on
// the same layout, the tolerances of every layout-equivalence test: the op
// sums the same terms in another order (reassociation, ~1e-6 relative).
TEST_P(FlashAttention, TrainsTheSameFunctionAsTheUnfusedCore) {
  const std::string layout = GetParam().overrides;
  const LayoutResult unfused = run_layout(layout);
  ASSERT_EQ(unfused.exit_code, 0) << unfused.log;
  ASSERT_EQ(unfused.losses.size(), 5u) << unfused.log;
  expect_same_function(unfused, run_layout(layout + kFlash), true);
}

const Layout kLayouts[] = {
    {"t1", "comm.world_size=1"},
    {"tp2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"pp2", "comm.world_size=2 parallel.pipeline.size=2"},
    {"llama_gqa_tp2", "comm.world_size=2 parallel.tensor.size=2 model.arch=llama model.kv_heads=2 "
                      "model.attention_dropout=0.1"},
    {"packed_documents", "comm.world_size=1 data.reset_attention_mask=true data.reset_position_ids=true"},
    // Each chunk one call against the gathered keys, at its query offset.
    {"cp2", "comm.world_size=2 parallel.context.size=2"},
    {"llama_gqa_cp4", "comm.world_size=4 parallel.context.size=4 model.arch=llama model.kv_heads=2"},
    {"cp2_tp2_sp", "comm.world_size=4 parallel.context.size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    // Ulysses: the one-rank call over whole sequences of the rank's heads.
    {"cp2_a2a", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a"},
    {"cp4_a2a_unbalanced", "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=a2a "
                           "parallel.context.load_balance=false"},
    {"llama_gqa_cp2_a2a", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a model.arch=llama "
                          "model.kv_heads=2"},
    {"cp2_a2a_tp2_sp", "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a "
                       "parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
};

INSTANTIATE_TEST_SUITE_P(Layouts, FlashAttention, ::testing::ValuesIn(kLayouts),
                         [](const auto& info) { return std::string(info.param.name); });

// Evaluation (dropout off, no backward) runs the flash core too.
TEST(FlashAttentionEvaluation, ValidationLossesEqualTheUnfusedCores) {
  const std::string run = "comm.world_size=1 train.eval_interval=5 train.eval_batches=2";
  const LayoutResult unfused = run_layout(run), flash = run_layout(run + kFlash);
  ASSERT_EQ(unfused.exit_code, 0) << unfused.log;
  ASSERT_EQ(flash.exit_code, 0) << flash.log;
  ASSERT_EQ(unfused.val_losses.size(), 1u) << unfused.log;
  ASSERT_EQ(flash.val_losses.size(), 1u) << flash.log;
  EXPECT_NEAR(flash.val_losses[0], unfused.val_losses[0], 1e-5 * unfused.val_losses[0]);
}

MemoryRecord dry(const std::string& overrides, int layers) {
  LayoutResult r = run_layout("--dry_run " + overrides + " model.layers=" + std::to_string(layers));
  EXPECT_EQ(r.exit_code, 0) << r.log;
  return r.memory;
}

// The existing ActivationMemory pattern: per layer and in total, within 5%.
TEST(FlashAttentionMemory, PerLayerAndTotalMatchTheFormula) {
  for (const char* layout : {"comm.world_size=1", "comm.world_size=2 parallel.tensor.size=2 "
                                                  "parallel.tensor.sequence_parallel=true kernels.dtype=bf16",
                             "comm.world_size=4 parallel.context.size=4 model.seq_len=128",
                             "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=a2a "
                             "model.seq_len=128"}) {
    SCOPED_TRACE(layout);
    const MemoryRecord two = dry(layout + std::string(kFlash), 2), four = dry(layout + std::string(kFlash), 4);
    ASSERT_FALSE(four.activations.empty());
    for (size_t rank = 0; rank < four.activations.size(); ++rank) {
      const double per_layer = (four.activations[rank] - two.activations[rank]) / 2.0;
      EXPECT_NEAR(per_layer, four.formula_per_layer, 0.05 * four.formula_per_layer) << "rank " << rank;
      EXPECT_NEAR(four.activations[rank], four.formula_total, 0.05 * four.formula_total) << "rank " << rank;
    }
  }
}

// The flash core has no scores, probabilities or mask, the activations
// selective recomputation drops: with flash it keeps what none keeps.
TEST(FlashAttentionMemory, SelectiveRecomputeHasNothingToDrop) {
  const std::string layout = "comm.world_size=1" + std::string(kFlash);
  const MemoryRecord selective = dry(layout + " recompute.plugin=selective", 4), none = dry(layout + " recompute.plugin=none", 4);
  ASSERT_FALSE(none.activations.empty());
  EXPECT_EQ(selective.activations, none.activations);
  EXPECT_EQ(selective.formula_total, none.formula_total);
}

// Per layer, sbh(34 + ...) + 4asb with flash: doubling s doubles it, where
// the unfused core's 5as^2b term makes it more than double.
TEST(FlashAttentionMemory, PerLayerGrowsLinearlyInTheSequence) {
  auto per_layer = [](const std::string& overrides) {
    return dry("comm.world_size=1 " + overrides, 4).formula_per_layer;
  };
  for (const char* backend : {"", kFlash}) {
    SCOPED_TRACE(backend[0] ? "flash" : "unfused");
    const double at128 = per_layer(std::string("model.seq_len=128") + backend);
    const double at256 = per_layer(std::string("model.seq_len=256") + backend);
    if (backend[0])
      EXPECT_NEAR(at256 / at128, 2.0, 1e-9);
    else
      EXPECT_GT(at256 / at128, 2.5);
  }
  const double four = dry("comm.world_size=1 model.seq_len=128" + std::string(kFlash), 4)
                          .activations[0],
               eight = dry("comm.world_size=1 model.seq_len=256" + std::string(kFlash), 4)
                           .activations[0];
  EXPECT_NEAR(eight / four, 2.0, 0.05);
}

}  // namespace
}  // namespace mh::test
