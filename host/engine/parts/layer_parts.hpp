// The parts a model's layers are built from, chosen once from its
// specification as Megatron-Core's ModuleSpec fills named slots with
// classes. This is the one place that reads the specification's choices;
// the skeleton (engine/layer.hpp) calls the parts and never asks which they
// are. A new variant is a new part class and a line here.
#pragma once

#include <memory>

#include "engine/parts/attention.hpp"
#include "engine/parts/mlp.hpp"
#include "engine/parts/norm.hpp"
#include "engine/parts/part_context.hpp"
#include "engine/parts/position.hpp"

namespace mh {

struct LayerParts {
  std::unique_ptr<NormPart> norm;          // the layer's two norms and the final one
  std::unique_ptr<PositionPart> position;  // applied inside attention
  std::unique_ptr<MlpPart> mlp;            // FC1, its activation and FC2, or the experts
};

LayerParts build_layer_parts(const PartContext& c);

// The full-sequence attention core of training and evaluation
// (model.attention_backend), encoding positions with `position`.
std::unique_ptr<AttentionPart> full_attention(const PartContext& c, const PositionPart& position);

}  // namespace mh
