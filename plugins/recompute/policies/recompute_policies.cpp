#include "recompute_policies.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <string_view>

namespace mh::recompute {

namespace {

// The activations abi.h lists ("Recompute"), which full recomputation
// rebuilds from a layer's input. A name outside this list is one a newer
// host added: every policy keeps it, since keeping is always correct and
// only costs memory.
constexpr std::array<std::string_view, 13> kLayerActivations = {
    "layer_input", "norm1", "qkv",  "attn_scores", "attn_mask", "attn_probs",  "attn_context",
    "attn_out_mask", "residual1", "norm2", "fc1", "mlp_act", "mlp_out_mask"};

// The attention core, which selective recomputation drops.
constexpr std::array<std::string_view, 3> kAttentionCore = {"attn_scores", "attn_mask", "attn_probs"};

bool listed(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The layer's position in its stage (chunk), after checking the query.
int32_t position_in_stage(const MH_RecomputeQuery& q) {
  require(q.activation != nullptr, "the query names no activation (MH_RecomputeQuery.activation is NULL)");
  require(q.stage_layers >= 1 && q.layer >= q.stage_first_layer &&
              q.layer < q.stage_first_layer + q.stage_layers,
          "layer " + std::to_string(q.layer) + " is outside its stage's layers [" +
              std::to_string(q.stage_first_layer) + ", " +
              std::to_string(q.stage_first_layer + q.stage_layers) + ")");
  return q.layer - q.stage_first_layer;
}

}  // namespace

MH_Decision KeepEverything::decide(const MH_RecomputeQuery& query) const {
  position_in_stage(query);
  return MH_KEEP;
}

FullRecompute::FullRecompute(const CreateContext& ctx)
    : uniform_(ctx.options.get_string("method") == "uniform"),
      num_layers_(static_cast<int32_t>(ctx.options.get_int("num_layers"))) {}

// Uniform: the first layer of every group of num_layers consecutive layers
// (the last group may be shorter). Block: each of the first num_layers.
bool FullRecompute::checkpointed(int32_t position) const {
  return uniform_ ? position % num_layers_ == 0 : position < num_layers_;
}

// Uniform recomputes every layer; block only the first num_layers, the rest
// keep all their activations.
bool FullRecompute::recomputed(int32_t position) const {
  return uniform_ || position < num_layers_;
}

MH_Decision FullRecompute::decide(const MH_RecomputeQuery& query) const {
  int32_t position = position_in_stage(query);
  if (!recomputed(position) || !listed(kLayerActivations, query.activation)) return MH_KEEP;
  bool kept = std::string_view(query.activation) == "layer_input" && checkpointed(position);
  return kept ? MH_KEEP : MH_RECOMPUTE;
}

MH_Decision SelectiveRecompute::decide(const MH_RecomputeQuery& query) const {
  position_in_stage(query);
  return listed(kAttentionCore, query.activation) ? MH_RECOMPUTE : MH_KEEP;
}

MH_ComponentDesc none_component() {
  return component<KeepEverything>("none", "1.0.0", "keep every activation; recompute nothing");
}

MH_ComponentDesc full_component() {
  return component<FullRecompute>(
      "full", "1.0.0",
      "Megatron full recomputation: keep only checkpointed layer inputs (uniform or block)",
      kFullOptions);
}

MH_ComponentDesc selective_component() {
  return component<SelectiveRecompute>(
      "selective", "1.0.0",
      "Megatron selective recomputation: recompute the attention core (scores, softmax, dropout)");
}

}  // namespace mh::recompute
