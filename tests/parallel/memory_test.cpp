// Measured activation memory per rank matches the paper's per-layer formula
// (Korthikanti et al. 2022, Table 2, generalised to our element sizes)
// within 5%, for tensor parallelism with and without sequence parallelism,
// in fp32 and in bf16.
// Dry runs: the tracker counts every allocation while nothing is computed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

struct Shape {
  const char* name;
  const char* overrides;
};

class ActivationMemory : public ::testing::TestWithParam<Shape> {};

MemoryRecord dry(const std::string& overrides, int layers) {
  LayoutResult r = run_layout("--dry_run " + overrides + " model.layers=" + std::to_string(layers));
  EXPECT_EQ(r.exit_code, 0) << r.log;
  return r.memory;
}

TEST_P(ActivationMemory, PerLayerAndTotalMatchTheFormula) {
  const std::string overrides = GetParam().overrides;
  MemoryRecord two = dry(overrides, 2), four = dry(overrides, 4);
  ASSERT_FALSE(four.activations.empty());
  for (size_t rank = 0; rank < four.activations.size(); ++rank) {
    const double per_layer = (four.activations[rank] - two.activations[rank]) / 2.0;
    EXPECT_NEAR(per_layer, four.formula_per_layer, 0.05 * four.formula_per_layer) << "rank " << rank;
    EXPECT_NEAR(four.activations[rank], four.formula_total, 0.05 * four.formula_total) << "rank " << rank;
  }
}

const Shape kShapes[] = {
    {"t1", "comm.world_size=1"},
    {"t2", "comm.world_size=2 parallel.tensor.size=2"},
    {"t2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"t4_sp", "comm.world_size=4 parallel.tensor.size=4 parallel.tensor.sequence_parallel=true"},
    {"t4_long", "comm.world_size=4 parallel.tensor.size=4 model.seq_len=128 model.hidden=128 model.heads=8"},
    {"t4_sp_long", "comm.world_size=4 parallel.tensor.size=4 parallel.tensor.sequence_parallel=true "
                   "model.seq_len=128 model.hidden=128 model.heads=8 train.micro_batch=4"},
    {"t2_sp_wide", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                   "model.hidden=256 model.heads=2 model.seq_len=64"},
    {"t1_bf16", "comm.world_size=1 kernels.dtype=bf16"},
    {"t2_sp_bf16", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true kernels.dtype=bf16"},
    {"llama_gqa_t2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                        "model.arch=llama model.kv_heads=2"},
    {"llama_mqa_t1_bf16", "comm.world_size=1 kernels.dtype=bf16 model.arch=llama model.kv_heads=1"},
    {"swiglu_t2", "comm.world_size=2 parallel.tensor.size=2 model.activation=swiglu"},
    // Context parallelism: s/cp rows, and each chunk's c queries score T_k keys.
    {"cp2", "comm.world_size=2 parallel.context.size=2 model.seq_len=128"},
    {"cp4_bf16", "comm.world_size=4 parallel.context.size=4 model.seq_len=128 kernels.dtype=bf16"},
    {"cp2_t2_sp", "comm.world_size=4 parallel.context.size=2 parallel.tensor.size=2 "
                  "parallel.tensor.sequence_parallel=true model.seq_len=128"},
    // Ulysses: whole sequences of a/(t cp) heads, s^2/cp scores per head.
    {"cp2_a2a", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a model.seq_len=128"},
    {"cp4_a2a_bf16", "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=a2a model.seq_len=128 "
                     "kernels.dtype=bf16"},
    {"cp2_a2a_t2_sp", "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a "
                      "parallel.tensor.size=2 parallel.tensor.sequence_parallel=true model.seq_len=128"},
    // Dropless routing: the experts' rows are s b k whatever the routing.
    {"moe_t1_bf16", "comm.world_size=1 kernels.dtype=bf16 model.arch=llama model.experts=8 model.router_topk=2 "
                    "model.moe_ffn_hidden=128"},
    // Expert parallelism: the dry run spreads the slots evenly, so each rank's experts receive s b k rows.
    {"moe_ep2_bf16", "comm.world_size=2 parallel.expert.size=2 kernels.dtype=bf16 model.arch=llama model.experts=8 "
                     "model.router_topk=2 model.moe_ffn_hidden=128"},
    // Context parallelism: the router and the experts see the rank's s/cp rows.
    {"moe_cp2_ep2_bf16", "comm.world_size=2 parallel.context.size=2 parallel.expert.size=2 kernels.dtype=bf16 "
                         "model.arch=llama model.experts=8 model.router_topk=2 model.moe_ffn_hidden=128 "
                         "model.seq_len=128"},
    // Tensor parallelism with SP: the router and the whole experts see the rank's s/t rows.
    {"moe_t2_sp_ep2_bf16", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                           "parallel.expert.size=2 kernels.dtype=bf16 model.arch=llama model.experts=8 "
                           "model.router_topk=2 model.moe_ffn_hidden=128"},
    {"moe_shared_t2_sp_bf16", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                              "kernels.dtype=bf16 model.arch=llama model.experts=8 model.router_topk=2 "
                              "model.moe_ffn_hidden=128 model.shared_experts=2 model.shared_expert_ffn_hidden=64"},
    // Shared experts add rows of their width; a capacity keeps the s b k bound.
    {"moe_shared_capacity_t1_bf16", "comm.world_size=1 kernels.dtype=bf16 model.arch=llama model.experts=8 "
                                    "model.router_topk=2 model.moe_ffn_hidden=128 model.shared_experts=2 "
                                    "model.shared_expert_ffn_hidden=64 model.moe_capacity_factor=1"},
    // Heads of 48 (a D = 192 against h = 64): QKV and the context are a D / h times as wide.
    {"head_dim_t2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                       "model.arch=llama model.kv_heads=2 model.qk_norm=true model.head_dim=48"},
    {"head_dim_flash_t1_bf16", "comm.world_size=1 kernels.dtype=bf16 model.arch=llama model.head_dim=48 "
                               "model.attention_backend=flash"},
};

INSTANTIATE_TEST_SUITE_P(Shapes, ActivationMemory, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return std::string(info.param.name); });

// Each rank of an expert group holds E/ep experts: on ep 2 a rank's weights
// are its data-parallel twin's less half the experts, 3 (E/2) h f_e per layer
// (f32 values, 4 bytes each).
TEST(ActivationMemory, ExpertParallelRanksHoldTheirShareOfTheExperts) {
  const std::string moe = " model.arch=llama model.experts=8 model.router_topk=2 model.moe_ffn_hidden=128";
  const MemoryRecord dp = dry("comm.world_size=2" + moe, 2), ep = dry("comm.world_size=2 parallel.expert.size=2" + moe, 2);
  ASSERT_EQ(dp.params.size(), 2u);
  ASSERT_EQ(ep.params.size(), 2u);
  const double h = 64, layers = 2, half_the_experts = 3 * 4 * h * 128 * layers * 4;  // bytes
  for (size_t rank = 0; rank < 2; ++rank)
    EXPECT_NEAR(dp.params[rank] - ep.params[rank], half_the_experts, 0.01 * half_the_experts) << "rank " << rank;
}

TEST(ActivationMemory, SequenceParallelDividesTheReplicatedPartByT) {
  const std::string model = " model.seq_len=128 model.hidden=128 model.heads=8";
  MemoryRecord tp = dry("comm.world_size=4 parallel.tensor.size=4" + model, 4);
  MemoryRecord sp = dry("comm.world_size=4 parallel.tensor.size=4 parallel.tensor.sequence_parallel=true" + model, 4);
  ASSERT_FALSE(tp.activations.empty());
  ASSERT_FALSE(sp.activations.empty());
  // Without SP each rank keeps sbh(4e+2) + sbh(4e+8e)/t + as^2b(2e+1)/t per layer; with SP all of it is /t.
  EXPECT_LT(sp.formula_per_layer, tp.formula_per_layer);
  EXPECT_NEAR(sp.activations[0] / tp.activations[0], sp.formula_total / tp.formula_total, 0.03);
}

// With 2-byte activations the formula is the paper's own, 34sbh + 5as^2b
// per layer (Korthikanti et al. 2022, Eq. 1), and the dry run keeps it.
TEST(ActivationMemory, Bf16PerLayerIsThePapersFormulaLiterally) {
  const double s = 32, b = 2, h = 64, a = 4;  // small.toml
  MemoryRecord two = dry("comm.world_size=1 kernels.dtype=bf16", 2), four = dry("comm.world_size=1 kernels.dtype=bf16", 4);
  ASSERT_FALSE(four.activations.empty());
  EXPECT_DOUBLE_EQ(four.formula_per_layer, 34 * s * b * h + 5 * a * s * s * b);
  EXPECT_NEAR((four.activations[0] - two.activations[0]) / 2.0, four.formula_per_layer, 0.05 * four.formula_per_layer);
}

// Llama's parts by hand (docs/models.md): bf16, t = 1, k = a/2, SwiGLU with
// f = 256 (Llama's rule for h = 64): sbh(4e+2) + sbh e(2 + 2k/a) + 3e sbf +
// a s^2 b (2e+1) = 40 sbh + 5 a s^2 b.
TEST(ActivationMemory, LlamaPerLayerFollowsItsParts) {
  const double s = 32, b = 2, h = 64, a = 4;  // small.toml
  const std::string llama = "comm.world_size=1 kernels.dtype=bf16 model.arch=llama model.kv_heads=2";
  MemoryRecord two = dry(llama, 2), four = dry(llama, 4);
  ASSERT_FALSE(four.activations.empty());
  EXPECT_DOUBLE_EQ(four.formula_per_layer, 40 * s * b * h + 5 * a * s * s * b);
  EXPECT_NEAR((four.activations[0] - two.activations[0]) / 2.0, four.formula_per_layer, 0.05 * four.formula_per_layer);
}

// The dry run models the real kernels' dtype, so it predicts a bf16 run's
// activation memory to the byte.
TEST(ActivationMemory, DryRunPredictsARealBf16RunExactly) {
  const std::string layout = "comm.world_size=2 parallel.tensor.size=2 kernels.dtype=bf16 train.steps=1";
  LayoutResult real = run_layout(layout), predicted = run_layout("--dry_run " + layout);
  ASSERT_EQ(real.exit_code, 0) << real.log;
  ASSERT_EQ(predicted.exit_code, 0) << predicted.log;
  ASSERT_EQ(real.memory.activations.size(), 2u);
  EXPECT_EQ(predicted.memory.activations, real.memory.activations);
  const MemoryRecord fp32 = dry("comm.world_size=2 parallel.tensor.size=2", 4);
  EXPECT_LT(predicted.memory.activations[0], 0.6 * fp32.activations[0]);
}

// Without a dtype key the dry run takes the real component's default:
// bf16 for the cuda kernels (built where nvcc is; a dry run needs no GPU).
TEST(ActivationMemory, DryRunOfTheCudaKernelsModelsTheirDefaultBf16) {
  if (run_layout("--list_plugins").log.find("mh_kernels_cuda.so") == std::string::npos)
    GTEST_SKIP() << "the cuda kernels are not built here";
  LayoutResult cuda = run_layout("--dry_run comm.world_size=1 kernels.plugin=cuda");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.log;
  const MemoryRecord bf16 = dry("comm.world_size=1 kernels.dtype=bf16", 4);
  EXPECT_EQ(cuda.memory.activations, bf16.activations);
}

TEST(OptimizerMemory, DistributedOptimizerShardsAdamWStateOverDataParallelRanks) {
  for (int dp : {2, 4}) {
    const std::string layout = "--dry_run comm.world_size=" + std::to_string(dp);
    LayoutResult full = run_layout(layout);
    LayoutResult sharded = run_layout(layout + " parallel.data.distributed_optimizer=true");
    ASSERT_EQ(sharded.exit_code, 0) << sharded.log;
    ASSERT_FALSE(sharded.memory.optimizer.empty());
    EXPECT_NEAR(sharded.memory.optimizer[0] / full.memory.optimizer[0], 1.0 / dp, 0.01) << "dp " << dp;
  }
}

// Megatron's distributed optimizer holds, per parameter, the bf16 parameter
// (2 bytes) and the f32 gradient (4) whole, and 1/d of the f32 master
// weight and AdamW's m and v (12). The parameters counted are fp32's values.
TEST(OptimizerMemory, DistributedOptimizerInBf16HoldsTwoPlusFourPlusTwelveOverDBytesPerParameter) {
  for (int dp : {2, 8}) {
    const std::string layout = "--dry_run train.micro_batch=1 comm.world_size=" + std::to_string(dp);
    LayoutResult fp32 = run_layout(layout);
    LayoutResult bf16 = run_layout(layout + " kernels.dtype=bf16 parallel.data.distributed_optimizer=true");
    ASSERT_EQ(bf16.exit_code, 0) << bf16.log;
    ASSERT_FALSE(fp32.memory.params.empty());
    const double parameters = fp32.memory.params[0] / 4;
    const MemoryRecord& m = bf16.memory;
    EXPECT_NEAR(m.params[0] / parameters, 2.0, 1e-9) << "dp " << dp;
    EXPECT_NEAR(m.grads[0] / parameters, 4.0, 1e-9) << "dp " << dp;
    EXPECT_NEAR((m.params[0] + m.grads[0] + m.optimizer[0]) / parameters, 6.0 + 12.0 / dp, 0.02 * (6.0 + 12.0 / dp))
        << "dp " << dp;
  }
}

// A 16k-token sequence on a device of 50 MiB: one rank's plan does not fit
// and is refused before step 1; on cp 4 (flash core) each rank plans a
// quarter of the activations and fits.
TEST(ContextParallelMemory, SixteenThousandTokensFitOnCp4WhereOneRankDoesNot) {
  const std::string model = " model.hidden=32 model.heads=2 model.seq_len=16384 train.global_batch=1 "
                            "train.micro_batch=1 train.steps=1 model.attention_backend=flash";
  const double device = 0.05 * 1024 * 1024 * 1024;  // kernels.memory_gb=0.05
  LayoutResult one = run_layout("comm.world_size=1 model.layers=1 kernels.memory_gb=0.05" + model);
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.log.find("more than the 51.20 MiB its device has"), std::string::npos) << one.log;
  MemoryRecord cp4 = dry("comm.world_size=4 parallel.context.size=4" + model, 1);
  ASSERT_EQ(cp4.total.size(), 4u);
  for (double total : cp4.total) EXPECT_LT(total, device);
}

}  // namespace
}  // namespace mh::test
