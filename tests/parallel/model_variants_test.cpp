// Every model variant computes the same function on every layout as on one
// rank (losses within 1e-5 relative over 5 steps, gathered gradients within
// 1e-4), with dropout on; and recomputation changes nothing, bit for bit.
// The mixture of experts' layouts include expert, context and tensor (with
// sequence) parallelism (a dropless router, so every layout routes every
// token as one rank does).
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

// Dropout stays on so that masks, recomputed or sharded, are checked too.
constexpr const char* kDropout = " model.dropout=0.1 model.attention_dropout=0.1";

struct Variant {
  const char* name;
  const char* model;
};

const Variant kLlamaGqa{"llama_gqa", "model.arch=llama model.kv_heads=2"};
const Variant kLlamaMqa{"llama_mqa", "model.arch=llama model.kv_heads=1"};
// Four key/value groups of two query heads: Ulysses over cp 4 gives each rank one.
const Variant kLlamaGqa8{"llama_gqa8", "model.arch=llama model.heads=8 model.kv_heads=4"};
// SwiGLU with biases takes the strided-bias path; untied without RoPE keeps
// the position table beside an lm_head.
const Variant kSwigluBias{"swiglu_bias", "model.activation=swiglu model.kv_heads=2 model.tie_embeddings=false"};
const Variant kMoe{"moe", "model.arch=llama model.experts=4 model.router_topk=2 model.moe_ffn_hidden=48 "
                         "model.router_aux_loss_coef=0.01"};
const Variant kMoeFlash{"moe_flash", "model.arch=llama model.experts=4 model.router_topk=2 model.moe_ffn_hidden=48 "
                                     "model.router_aux_loss_coef=0.01 model.attention_backend=flash"};
// Qwen2-MoE's layer (QKV biases alone, softmax gates, a gated shared expert)
// with a token capacity that drops choices.
const Variant kQwen2Moe{"qwen2_moe", "model.arch=llama model.qkv_bias=true model.experts=4 model.router_topk=2 "
                                     "model.moe_ffn_hidden=48 model.router_norm_topk=false model.shared_experts=1 "
                                     "model.shared_expert_ffn_hidden=40 model.shared_expert_gate=true "
                                     "model.moe_capacity_factor=0.75 model.router_aux_loss_coef=0.01"};
// The same layer dropless, for the layouts that split a micro-batch's rows.
const Variant kQwen2MoeDropless{"qwen2_moe_dropless",
                                "model.arch=llama model.qkv_bias=true model.experts=4 model.router_topk=2 "
                                "model.moe_ffn_hidden=48 model.router_norm_topk=false model.shared_experts=1 "
                                "model.shared_expert_ffn_hidden=40 model.shared_expert_gate=true "
                                "model.router_aux_loss_coef=0.01"};
// Qwen3-MoE's layer: QK-norm, renormalised top-k gates, heads of 24 over h = 64.
const Variant kQwen3Moe{"qwen3_moe", "model.arch=llama model.qk_norm=true model.head_dim=24 model.experts=4 "
                                     "model.router_topk=2 model.moe_ffn_hidden=48 model.router_aux_loss_coef=0.01"};
// Qwen3's dense layer: QK-norm over heads of 24 (a D = 96 against h = 64),
// whose replicated weights each tensor rank sees only its heads of.
const Variant kQwen3{"qwen3", "model.arch=llama model.kv_heads=2 model.qk_norm=true model.head_dim=24"};
const Variant kQwen3Flash{"qwen3_flash", "model.arch=llama model.kv_heads=2 model.qk_norm=true model.head_dim=24 "
                                         "model.attention_backend=flash"};
const Variant kRmsRopeGelu{"rmsnorm_rope_gelu_nobias", "model.normalization=rmsnorm model.position=rope model.bias=false"};

struct Case {
  const char* name;
  Variant variant;
  const char* layout;
  bool mpi = false;
  int ranks = 0;
  bool compare_grads = true;  // the distributed optimizer's gradients are per-rank shards
};

// gtest names a parameter by printing it.
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

const LayoutResult& single_rank(const Variant& v) {
  static std::map<std::string, LayoutResult> cache;
  auto it = cache.find(v.name);
  if (it == cache.end()) it = cache.emplace(v.name, run_layout(std::string("comm.world_size=1 ") + v.model + kDropout)).first;
  return it->second;
}

class VariantSameFunctionAsOneRank : public ::testing::TestWithParam<Case> {};

TEST_P(VariantSameFunctionAsOneRank, LossesAndGradientsMatch) {
  const Case& c = GetParam();
  const LayoutResult& ref = single_rank(c.variant);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 5u) << ref.log;
  expect_same_function(ref, run_layout(std::string(c.layout) + " " + c.variant.model + kDropout, c.mpi, c.ranks),
                       c.compare_grads);
}

const Case kCases[] = {
    {"llama_gqa_tp2", kLlamaGqa, "comm.world_size=2 parallel.tensor.size=2"},
    {"llama_gqa_tp2_sp", kLlamaGqa, "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"llama_gqa_pp2", kLlamaGqa, "comm.world_size=2 parallel.pipeline.size=2"},
    {"llama_gqa_pp2_interleaved", kLlamaGqa,
     "comm.world_size=2 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved parallel.pipeline.virtual_stages=2"},
    {"llama_gqa_dp2", kLlamaGqa, "comm.world_size=2"},
    {"llama_gqa_tp2_sp_pp2_dp2", kLlamaGqa,
     "comm.world_size=8 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2"},
    {"llama_gqa_dp2_distributed_optimizer", kLlamaGqa, "comm.world_size=2 parallel.data.distributed_optimizer=true",
     false, 0, false},
    {"llama_gqa_mpi2_tp2_sp", kLlamaGqa, "comm.plugin=mpi parallel.tensor.size=2 parallel.tensor.sequence_parallel=true",
     true, 2},
    {"llama_mqa_pp2_dp2", kLlamaMqa, "comm.world_size=4 parallel.pipeline.size=2"},
    {"swiglu_bias_tp2_sp_pp2", kSwigluBias,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2"},
    {"moe_pp2", kMoe, "comm.world_size=2 parallel.pipeline.size=2"},
    {"moe_pp2_dp2", kMoe, "comm.world_size=4 parallel.pipeline.size=2"},
    {"moe_dp2_distributed_optimizer", kMoe, "comm.world_size=2 parallel.data.distributed_optimizer=true", false, 0,
     false},
    // RoPE from each chunk's global positions, grouped keys gathered.
    {"llama_gqa_cp2", kLlamaGqa, "comm.world_size=2 parallel.context.size=2"},
    {"llama_mqa_cp4", kLlamaMqa, "comm.world_size=4 parallel.context.size=4"},
    {"llama_gqa_cp2_tp2_sp", kLlamaGqa,
     "comm.world_size=4 parallel.context.size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    // Ulysses: each rank takes whole sequences of its share of the groups.
    {"llama_gqa_cp2_a2a", kLlamaGqa, "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a"},
    {"llama_gqa8_cp4_a2a", kLlamaGqa8, "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=a2a"},
    {"llama_gqa8_cp2_a2a_tp2_sp", kLlamaGqa8,
     "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a parallel.tensor.size=2 "
     "parallel.tensor.sequence_parallel=true"},
    // The ring: grouped keys and values passed block by block (flash core).
    {"llama_gqa_cp2_p2p", kLlamaGqa,
     "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=p2p model.attention_backend=flash"},
    {"llama_mqa_cp4_p2p", kLlamaMqa,
     "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=p2p model.attention_backend=flash"},
    {"moe_ep2", kMoe, "comm.world_size=2 parallel.expert.size=2"},
    {"moe_ep4", kMoe, "comm.world_size=4 parallel.expert.size=4"},
    {"moe_ep2_pp2", kMoe, "comm.world_size=4 parallel.pipeline.size=2 parallel.expert.size=2"},
    {"moe_ep2_dp4", kMoe, "comm.world_size=4 parallel.expert.size=2"},
    {"moe_ep2_dp4_distributed_optimizer", kMoe,
     "comm.world_size=4 parallel.expert.size=2 parallel.data.distributed_optimizer=true", false, 0, false},
    {"moe_mpi2_ep2", kMoe, "comm.plugin=mpi parallel.expert.size=2", true, 2},
    // The load-balancing loss from the micro-batch's choices and probabilities
    // summed over the context group; the expert group drawn from the
    // replicas and their context ranks.
    {"moe_cp2", kMoe, "comm.world_size=2 parallel.context.size=2"},
    {"moe_cp2_a2a_dp2", kMoe, "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a"},
    {"moe_flash_cp2_p2p", kMoeFlash, "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=p2p"},
    {"moe_ep2_cp2", kMoe, "comm.world_size=2 parallel.context.size=2 parallel.expert.size=2"},
    {"moe_ep4_cp2_dp2", kMoe, "comm.world_size=4 parallel.context.size=2 parallel.expert.size=4"},
    // Tensor parallelism with sequence parallelism (Megatron-Core's expert
    // tensor-parallel size 1): each tensor rank routes its sequence shard to
    // whole experts, the load-balancing statistics summed over context x
    // tensor, and the expert group drawn from the data, context and tensor
    // ranks.
    {"moe_tp2_sp", kMoe, "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"moe_ep2_tp2_sp", kMoe,
     "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.expert.size=2"},
    {"moe_ep4_tp2_sp_dp2", kMoe,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.expert.size=4"},
    {"moe_ep2_tp2_sp_pp2", kMoe,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2 "
     "parallel.expert.size=2"},
    {"moe_ep2_tp2_sp_cp2", kMoe,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.context.size=2 "
     "parallel.expert.size=2"},
    {"moe_ep2_tp2_sp_dp2_distributed_optimizer", kMoe,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.expert.size=2 "
     "parallel.data.distributed_optimizer=true",
     false, 0, false},
    // The experts' optimizer state over their expert-data group of d t = 4 ranks.
    {"moe_tp2_sp_dp2_distributed_optimizer", kMoe,
     "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
     "parallel.data.distributed_optimizer=true",
     false, 0, false},
    // Shared experts, gated, replicated over the tensor group like the router.
    {"qwen2_moe_dropless_ep2_tp2_sp", kQwen2MoeDropless,
     "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.expert.size=2"},
    {"qwen2_moe_pp2", kQwen2Moe, "comm.world_size=2 parallel.pipeline.size=2"},
    {"qwen2_moe_dp2", kQwen2Moe, "comm.world_size=2"},
    {"qwen3_moe_pp2_dp2", kQwen3Moe, "comm.world_size=4 parallel.pipeline.size=2"},
    // QK-norm's weights: their gradient summed over the tensor group, with and without SP.
    {"qwen3_tp2", kQwen3, "comm.world_size=2 parallel.tensor.size=2"},
    {"qwen3_tp2_sp", kQwen3, "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    {"qwen3_pp2", kQwen3, "comm.world_size=2 parallel.pipeline.size=2"},
    {"qwen3_cp2", kQwen3, "comm.world_size=2 parallel.context.size=2"},
    {"qwen3_cp2_a2a", kQwen3, "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a"},
    {"qwen3_flash_cp2_p2p", kQwen3Flash, "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=p2p"},
    {"qwen3_flash_tp2_sp", kQwen3Flash,
     "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true"},
    // Shared experts and a capacity beside expert parallelism: drops are decided before the exchange.
    {"qwen2_moe_ep2", kQwen2Moe, "comm.world_size=2 parallel.expert.size=2"},
    {"rmsnorm_rope_gelu_nobias_tp4_sp", kRmsRopeGelu,
     "comm.world_size=4 parallel.tensor.size=4 parallel.tensor.sequence_parallel=true"},
};

INSTANTIATE_TEST_SUITE_P(Variants, VariantSameFunctionAsOneRank, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

class VariantRecompute : public ::testing::TestWithParam<const char*> {};

TEST_P(VariantRecompute, GivesBitIdenticalLossesAndGradients) {
  const std::string layout = std::string("comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true ") +
                             kLlamaGqa.model + kDropout + " ";
  static const LayoutResult keep_all = run_layout(layout + "recompute.plugin=none");
  ASSERT_EQ(keep_all.exit_code, 0) << keep_all.log;
  LayoutResult r = run_layout(layout + GetParam());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.losses, keep_all.losses);
  ASSERT_EQ(r.grads.size(), keep_all.grads.size());
  for (const auto& [name, g] : keep_all.grads) EXPECT_EQ(r.grads.at(name), g) << name;
}

const char* const kPolicies[] = {"recompute.plugin=selective",
                                 "recompute.plugin=full recompute.method=uniform recompute.num_layers=2",
                                 "recompute.plugin=full recompute.method=block recompute.num_layers=1"};

INSTANTIATE_TEST_SUITE_P(Policies, VariantRecompute, ::testing::ValuesIn(kPolicies), [](const auto& info) {
  return std::string(info.index == 0 ? "selective" : info.index == 1 ? "full_uniform_2" : "full_block_1");
});

// Full recomputation of `layout` against keeping every activation: the same
// losses and gradients bit for bit. Returns the recomputing run.
LayoutResult expect_full_recompute_bit_identical(const std::string& layout) {
  const LayoutResult keep_all = run_layout(layout + "recompute.plugin=none");
  EXPECT_EQ(keep_all.exit_code, 0) << keep_all.log;
  LayoutResult r = run_layout(layout + "recompute.plugin=full recompute.method=uniform recompute.num_layers=2");
  EXPECT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.losses, keep_all.losses);
  EXPECT_EQ(r.grads.size(), keep_all.grads.size());
  for (const auto& [name, g] : keep_all.grads) {
    EXPECT_EQ(r.grads.count(name), 1u) << name;
    if (r.grads.count(name) == 1) EXPECT_EQ(r.grads.at(name), g) << name;
  }
  return r;
}

// The shared expert's FC1 and activation sit in the mixture's buffers: full
// recomputation rebuilds them, with the routing (capacity drops included)
// the forward kept.
TEST(ModelVariants, MixtureWithSharedExpertRecomputesBitIdentically) {
  const LayoutResult r =
      expect_full_recompute_bit_identical(std::string("comm.world_size=1 ") + kQwen2Moe.model + kDropout + " ");
  EXPECT_EQ(r.grads.count("layers.0.qkv_b"), 1u);
  EXPECT_EQ(r.grads.count("layers.0.proj_b"), 0u);
  EXPECT_EQ(r.grads.at("layers.0.shared_expert_gate_w").size(), r.grads.at("layers.0.ln1_w").size());
}

// Under tensor and sequence parallelism full recomputation rebuilds each
// rank's routed shard, with the routing and the exchange's counts the
// forward kept.
TEST(ModelVariants, MixtureUnderTensorParallelismRecomputesBitIdentically) {
  expect_full_recompute_bit_identical(std::string("comm.world_size=2 parallel.tensor.size=2 "
                                                  "parallel.tensor.sequence_parallel=true parallel.expert.size=2 ") +
                                      kMoe.model + kDropout + " ");
}

TEST(ModelVariants, TensorParallelSizeMustDivideKeyValueHeads) {
  LayoutResult r = run_layout("comm.world_size=2 parallel.tensor.size=2 model.arch=llama model.kv_heads=1");
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("model.kv_heads"), std::string::npos) << r.log;
}

TEST(ModelVariants, OddHeadDimUnderRopeIsRefusedNamingTheKey) {
  LayoutResult r = run_layout("comm.world_size=1 model.arch=llama model.head_dim=15");
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("model.head_dim = 15 is odd"), std::string::npos) << r.log;
}

TEST(ModelVariants, HeadDimShapesTheAttentionWeights) {
  const LayoutResult& r = single_rank(kQwen3);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  // h = 64, a = 4, k = 2, D = 24: QKV [(4 + 2 * 2) 24, 64], proj [64, 4 * 24], QK-norm [24].
  EXPECT_EQ(r.grads.at("layers.0.qkv_w").size(), size_t((4 + 2 * 2) * 24 * 64));
  EXPECT_EQ(r.grads.at("layers.0.proj_w").size(), size_t(64 * 4 * 24));
  EXPECT_EQ(r.grads.at("layers.0.q_norm_w").size(), 24u);
  EXPECT_EQ(r.grads.at("layers.0.k_norm_w").size(), 24u);
}

TEST(ModelVariants, ExpertParallelSizeMustDivideTheExperts) {
  LayoutResult r = run_layout(std::string("comm.world_size=3 parallel.expert.size=3 ") + kMoe.model);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("parallel.expert.size = 3 does not divide model.experts = 4"), std::string::npos) << r.log;
}

TEST(ModelVariants, ExpertParallelSizeMustDivideTheDataParallelSize) {
  LayoutResult r =
      run_layout(std::string("comm.world_size=2 parallel.pipeline.size=2 parallel.expert.size=2 ") + kMoe.model);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("parallel.expert.size = 2 does not divide the data-parallel x context x tensor size = 1"), std::string::npos)
      << r.log;
}

TEST(ModelVariants, CapacityWithContextParallelismIsRefusedNamingTheKeys) {
  LayoutResult r = run_layout(std::string("comm.world_size=2 parallel.context.size=2 ") + kQwen2Moe.model);
  EXPECT_NE(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("model.moe_capacity_factor > 0 with parallel.context.size = 2"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("set model.moe_capacity_factor = 0 (dropless) or parallel.context.size = 1"), std::string::npos)
      << r.log;
}

TEST(ModelVariants, ExpertsWithTensorParallelismWithoutSequenceParallelismAreRefusedNamingTheKey) {
  LayoutResult r = run_layout(std::string("comm.world_size=2 parallel.tensor.size=2 ") + kMoe.model);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("model.experts = 4 with parallel.tensor.size = 2 needs sequence parallelism: set "
                       "parallel.tensor.sequence_parallel = true"),
            std::string::npos)
      << r.log;
}

TEST(ModelVariants, CapacityWithSequenceParallelismIsRefusedNamingTheKeys) {
  LayoutResult r = run_layout(std::string("comm.world_size=2 parallel.tensor.size=2 "
                                          "parallel.tensor.sequence_parallel=true ") +
                              kQwen2Moe.model);
  EXPECT_NE(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("model.moe_capacity_factor > 0 with parallel.tensor.size = 2 and sequence parallelism"),
            std::string::npos)
      << r.log;
}

TEST(ModelVariants, LlamaPresetHasNoPositionTableBiasesOrTiedOutput) {
  const LayoutResult& r = single_rank(kLlamaGqa);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.grads.count("wpe"), 0u);
  EXPECT_EQ(r.grads.count("layers.0.qkv_b"), 0u);
  EXPECT_EQ(r.grads.count("layers.0.ln1_b"), 0u);
  EXPECT_EQ(r.grads.count("lm_head"), 1u);
  EXPECT_EQ(r.grads.count("layers.0.gate_w"), 1u);
  // h = 64, a = 4, k = 2: Q of 4 heads and K, V of 2, head size 16.
  EXPECT_EQ(r.grads.at("layers.0.qkv_w").size(), size_t((4 + 2 * 2) * 16 * 64));
}

}  // namespace
}  // namespace mh::test
