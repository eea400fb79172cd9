// Specification of the recompute policies "none", "full" and "selective",
// exercised through their descriptors and MH_RecomputeApi. A layer's
// decisions are written as one letter per activation in the order abi.h
// lists them (kActivations), K(eep) or R(ecompute).
#include "component_harness.hpp"
#include "plugin_module.hpp"
#include "recompute_policies.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using mh::testing::describe;
using mh::testing::Instance;
using mh::testing::Overrides;

constexpr const char* kActivations[] = {
    "layer_input", "norm1", "qkv",   "attn_scores", "attn_mask", "attn_probs",  "attn_context",
    "attn_out_mask", "residual1", "norm2", "fc1", "mlp_act", "mlp_out_mask"};

constexpr const char* kKeepAll = "KKKKKKKKKKKKK";
constexpr const char* kInputOnly = "KRRRRRRRRRRRR";

class Policy {
 public:
  Policy(const MH_ComponentDesc& desc, const Overrides& options = {})
      : instance_(desc, "recompute", options) {}

  std::string status(const MH_RecomputeQuery& q) const {
    int32_t decision = -1;
    return describe(instance_.api().decide(instance_.self(), &q, &decision));
  }

  // The decision for `activation` of `layer` in a stage (or chunk) holding
  // layers [first, first + count).
  MH_Decision decision(int32_t layer, int32_t first, int32_t count, const char* activation) const {
    int32_t out = -1;
    MH_RecomputeQuery q = query(layer, first, count, activation);
    mh::check(instance_.api().decide(instance_.self(), &q, &out), "decide");
    return MH_Decision(out);
  }

  // The decisions for every activation of `layer` in a stage (or chunk)
  // holding layers [first, first + count).
  std::string layer(int32_t layer, int32_t first, int32_t count) const {
    std::string out;
    for (const char* a : kActivations) out += decision(layer, first, count, a) == MH_KEEP ? 'K' : 'R';
    return out;
  }

  // layer() for every layer of the stage.
  std::vector<std::string> stage(int32_t first, int32_t count) const {
    std::vector<std::string> out;
    for (int32_t l = first; l < first + count; ++l) out.push_back(layer(l, first, count));
    return out;
  }

  static MH_RecomputeQuery query(int32_t layer, int32_t first, int32_t count, const char* activation) {
    return MH_RecomputeQuery{
        MH_STRUCT_SIZE(MH_RecomputeQuery, bytes), layer, first, count, activation, 1 << 20};
  }

 private:
  Instance<MH_RecomputeApi> instance_;
};

using Layers = std::vector<std::string>;

Policy full(const std::string& method, int64_t num_layers) {
  return Policy(mh::recompute::full_component(), {{"method", method}, {"num_layers", num_layers}});
}

TEST(RecomputeNone, KeepsEveryActivationOfEveryLayer) {
  Policy none(mh::recompute::none_component());
  EXPECT_EQ(none.stage(4, 3), (Layers{kKeepAll, kKeepAll, kKeepAll}));
}

TEST(RecomputeSelective, RecomputesOnlyTheAttentionScoresSoftmaxDropoutMaskAndOutput) {
  Policy selective(mh::recompute::selective_component());
  EXPECT_EQ(selective.layer(0, 0, 1), "KKKRRRKKKKKKK");
}

TEST(RecomputeSelective, TreatsEveryLayerAlike) {
  Policy selective(mh::recompute::selective_component());
  EXPECT_EQ(selective.stage(6, 3), (Layers(3, "KKKRRRKKKKKKK")));
}

TEST(RecomputeFull, DefaultKeepsOnlyEachLayersInput) {
  Policy defaults(mh::recompute::full_component());
  EXPECT_EQ(defaults.stage(0, 3), (Layers{kInputOnly, kInputOnly, kInputOnly}));
}

TEST(RecomputeFull, UniformKeepsOnlyTheInputOfEachGroupOfNumLayers) {
  EXPECT_EQ(full("uniform", 3).stage(0, 8),
            (Layers{kInputOnly, "RRRRRRRRRRRRR", "RRRRRRRRRRRRR",  // group 0-2
                    kInputOnly, "RRRRRRRRRRRRR", "RRRRRRRRRRRRR",  // group 3-5
                    kInputOnly, "RRRRRRRRRRRRR"}));                // shorter last group
}

TEST(RecomputeFull, UniformGroupsCountFromTheStagesFirstLayer) {
  EXPECT_EQ(full("uniform", 2).stage(5, 4),
            (Layers{kInputOnly, "RRRRRRRRRRRRR", kInputOnly, "RRRRRRRRRRRRR"}));
}

TEST(RecomputeFull, UniformWithMoreLayersThanTheStageCheckpointsOnlyItsInput) {
  EXPECT_EQ(full("uniform", 8).stage(4, 2), (Layers{kInputOnly, "RRRRRRRRRRRRR"}));
}

TEST(RecomputeFull, BlockRecomputesTheFirstNumLayersOfTheStageAndKeepsTheRest) {
  EXPECT_EQ(full("block", 2).stage(8, 4), (Layers{kInputOnly, kInputOnly, kKeepAll, kKeepAll}));
}

TEST(RecomputeFull, BlockWithMoreLayersThanTheStageRecomputesEveryLayer) {
  EXPECT_EQ(full("block", 5).stage(0, 3), (Layers{kInputOnly, kInputOnly, kInputOnly}));
}

TEST(RecomputeQuery, RefusesALayerOutsideItsStage) {
  Policy none(mh::recompute::none_component());
  EXPECT_EQ(none.status(Policy::query(7, 8, 4, "qkv")),
            "INVALID_ARGUMENT: layer 7 is outside its stage's layers [8, 12)");
}

TEST(RecomputeQuery, RefusesAQueryWithoutAnActivation) {
  Policy selective(mh::recompute::selective_component());
  EXPECT_EQ(selective.status(Policy::query(0, 0, 1, nullptr)),
            "INVALID_ARGUMENT: the query names no activation (MH_RecomputeQuery.activation is NULL)");
}

// A newer host may list an activation the policy does not know: keeping it
// is always correct.
TEST(RecomputeQuery, EveryPolicyKeepsAnActivationItDoesNotKnow) {
  EXPECT_EQ(Policy(mh::recompute::none_component()).decision(0, 0, 1, "router_probs"), MH_KEEP);
  EXPECT_EQ(Policy(mh::recompute::selective_component()).decision(0, 0, 1, "router_probs"), MH_KEEP);
  EXPECT_EQ(full("uniform", 1).decision(1, 0, 2, "router_probs"), MH_KEEP);
}

TEST(RecomputeModule, DeclaresTheNoneFullAndSelectiveComponents) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "recompute 1.0.0 " + mh::testing::kBuiltAbi + ": recompute none []; recompute full [method, num_layers]; "
            "recompute selective []");
}

}  // namespace
