#include "engine/parts/layer_parts.hpp"

#include <megahost/error.hpp>

#include <string>

#include "engine/parts/moe_mlp.hpp"

namespace mh {
namespace {

std::unique_ptr<NormPart> norm(const PartContext& c) {
  switch (c.d.spec.norm) {
    case Norm::kLayerNorm: return std::make_unique<LayerNormPart>(c);
    case Norm::kRmsNorm: return std::make_unique<RmsNormPart>(c);
  }
  return nullptr;
}

std::unique_ptr<PositionPart> position(const PartContext& c) {
  switch (c.d.spec.position) {
    case Position::kLearned: return std::make_unique<LearnedPositionPart>(c);
    case Position::kRope: return std::make_unique<RotaryPositionPart>(c);
  }
  return nullptr;
}

std::unique_ptr<SharedExpertPart> shared_expert(const PartContext& c) {
  require(c.d.spec.shared_experts > 0 || !c.d.spec.shared_expert_gate,
          "model.shared_expert_gate = true gates shared experts; set model.shared_experts > 0 or the gate false");
  if (c.d.spec.shared_experts == 0) return nullptr;
  return std::make_unique<SharedExpertPart>(c);
}

std::unique_ptr<MlpPart> mlp(const PartContext& c) {
  const ModelSpec& s = c.d.spec;
  require(c.d.moe() || (s.shared_experts == 0 && s.capacity_factor == 0),
          "model.shared_experts and model.moe_capacity_factor belong to a mixture of experts; set model.experts > 0 "
          "or leave them 0");
  if (c.d.moe()) return std::make_unique<MoeMlpPart>(c, shared_expert(c));
  switch (c.d.spec.activation) {
    case MlpActivation::kGelu: return std::make_unique<GeluMlpPart>(c);
    case MlpActivation::kSwiglu: return std::make_unique<SwigluMlpPart>(c);
  }
  return nullptr;
}

}  // namespace

LayerParts build_layer_parts(const PartContext& c) { return {norm(c), position(c), mlp(c)}; }

namespace {

std::unique_ptr<AttentionPart> attention_core(const PartContext& c, const PositionPart& position) {
  switch (c.d.spec.attention_backend) {
    case AttentionBackend::kUnfused: return std::make_unique<AttentionPart>(c, position);
    case AttentionBackend::kFlash: return std::make_unique<FlashAttentionPart>(c, position);
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<AttentionPart> full_attention(const PartContext& c, const PositionPart& position) {
  std::unique_ptr<AttentionPart> part = attention_core(c, position);
  if (c.d.cp > 1 && c.d.cp_comm == ContextComm::kA2a)
    part->shard_heads([&](const PartContext& heads) { return attention_core(heads, position); });
  return part;
}

}  // namespace mh
