// Every recompute policy computes the same function as keeping everything
// (bit-identical: the kernels are deterministic and recomputed dropout masks
// come from the same counters), and keeps the memory the paper says.
#include <gtest/gtest.h>

#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kLayout =
    "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true model.layers=4 ";

struct Policy {
  const char* name;
  const char* overrides;
};

const Policy kPolicies[] = {
    {"selective", "recompute.plugin=selective"},
    {"full_uniform_1", "recompute.plugin=full recompute.method=uniform recompute.num_layers=1"},
    {"full_uniform_2", "recompute.plugin=full recompute.method=uniform recompute.num_layers=2"},
    {"full_block_1", "recompute.plugin=full recompute.method=block recompute.num_layers=1"},
    {"full_block_3", "recompute.plugin=full recompute.method=block recompute.num_layers=3"},
};

class RecomputePolicy : public ::testing::TestWithParam<Policy> {};

TEST_P(RecomputePolicy, GivesBitIdenticalLossesAndGradients) {
  static const LayoutResult keep_all = run_layout(std::string(kLayout) + "recompute.plugin=none");
  ASSERT_EQ(keep_all.exit_code, 0) << keep_all.log;
  LayoutResult r = run_layout(std::string(kLayout) + GetParam().overrides);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.losses, keep_all.losses);
  ASSERT_EQ(r.grads.size(), keep_all.grads.size());
  for (const auto& [name, g] : keep_all.grads) EXPECT_EQ(r.grads.at(name), g) << name;
}

TEST_P(RecomputePolicy, KeepsThePerLayerActivationsOfTheFormula) {
  for (const char* sp : {"false", "true"}) {
    std::string overrides = std::string("--dry_run comm.world_size=2 parallel.tensor.size=2 ") +
                            "parallel.tensor.sequence_parallel=" + sp + " " + GetParam().overrides;
    // Two depths whose difference is whole checkpoint chunks for every policy above.
    LayoutResult shallow = run_layout(overrides + " model.layers=6");
    LayoutResult deep = run_layout(overrides + " model.layers=12");
    ASSERT_EQ(deep.exit_code, 0) << deep.log;
    const double measured = (deep.memory.activations[0] - shallow.memory.activations[0]) / 6.0;
    const double formula = (deep.memory.formula_per_layer * 12 - shallow.memory.formula_per_layer * 6) / 6.0;
    EXPECT_NEAR(measured, formula, 0.05 * formula) << "sequence_parallel = " << sp;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, RecomputePolicy, ::testing::ValuesIn(kPolicies),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(RecomputeMemory, SelectiveDropsTheAttentionCoreAndFullKeepsOnlyInputs) {
  const std::string base = "--dry_run comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true ";
  LayoutResult none = run_layout(base + "recompute.plugin=none");
  LayoutResult selective = run_layout(base + "recompute.plugin=selective");
  LayoutResult full = run_layout(base + "recompute.plugin=full");
  ASSERT_EQ(full.exit_code, 0) << full.log;
  // s=32, b=2, h=64, a=4, t=2, e=4: sbh(4e+2)/t + sbh(12e)/t + as^2b(2e+1)/t = 172032 bytes.
  EXPECT_DOUBLE_EQ(none.memory.formula_per_layer, 172032.0);
  // Without the a s^2 b (2e+1)/t = 36864 bytes: sbh(16e+2)/t.
  EXPECT_DOUBLE_EQ(selective.memory.formula_per_layer, 172032.0 - 36864.0);
  // Only the layer input, already a sequence shard: e sbh / t.
  EXPECT_DOUBLE_EQ(full.memory.formula_per_layer, 4.0 * 32 * 2 * 64 / 2);
}

}  // namespace
}  // namespace mh::test
