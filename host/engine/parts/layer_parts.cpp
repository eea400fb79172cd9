#include "engine/parts/layer_parts.hpp"

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

std::unique_ptr<MlpPart> mlp(const PartContext& c) {
  if (c.d.moe()) return std::make_unique<MoeMlpPart>(c);
  switch (c.d.spec.activation) {
    case MlpActivation::kGelu: return std::make_unique<GeluMlpPart>(c);
    case MlpActivation::kSwiglu: return std::make_unique<SwigluMlpPart>(c);
  }
  return nullptr;
}

}  // namespace

LayerParts build_layer_parts(const PartContext& c) { return {norm(c), position(c), mlp(c)}; }

std::unique_ptr<AttentionPart> full_attention(const PartContext& c, const PositionPart& position) {
  switch (c.d.spec.attention_backend) {
    case AttentionBackend::kUnfused: return std::make_unique<AttentionPart>(c, position);
    case AttentionBackend::kFlash: return std::make_unique<FlashAttentionPart>(c, position);
  }
  return nullptr;
}

}  // namespace mh
