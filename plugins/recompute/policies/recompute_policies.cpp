#include "recompute_policies.hpp"

#include <string>

namespace mh::recompute {

namespace {

// The layer's position in its stage (chunk), after checking the query.
int32_t position_in_stage(const MH_RecomputeQuery& q) {
  require(q.activation >= 0 && q.activation < MH_ACT_COUNT,
          "unknown activation " + std::to_string(q.activation));
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
  if (!recomputed(position)) return MH_KEEP;
  bool kept = query.activation == MH_ACT_LAYER_INPUT && checkpointed(position);
  return kept ? MH_KEEP : MH_RECOMPUTE;
}

MH_Decision SelectiveRecompute::decide(const MH_RecomputeQuery& query) const {
  position_in_stage(query);
  switch (query.activation) {
    case MH_ACT_ATTN_SCORES:
    case MH_ACT_ATTN_MASK:
    case MH_ACT_ATTN_PROBS: return MH_RECOMPUTE;
    default: return MH_KEEP;
  }
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
