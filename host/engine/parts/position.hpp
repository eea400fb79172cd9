// The position encoding's part inside attention, chosen by the model's
// specification (layer_parts.hpp): rotary embeddings rotate each query head
// and key in place by its position; learned positions are added to the
// embedding instead, and leave attention's heads as they are.
#pragma once

#include <megahost/abi.h>

#include "engine/parts/part_context.hpp"

namespace mh {

class PositionPart {
 public:
  explicit PositionPart(const PartContext& c) : c_(c) {}
  virtual ~PositionPart() = default;

  // heads [batch, rows, head_dim]: one query head or key of every group,
  // whose row r sits at position first_position + r, or, with packed
  // documents, at first_position + positions[sample, r] (positions: I32
  // [b, rows], data NULL without). `inverse` undoes the encoding (its backward).
  virtual void encode(const MH_Tensor& heads, int64_t first_position, const MH_Tensor& positions,
                      bool inverse) const = 0;

 protected:
  PartContext c_;
};

// Positions live in the embedding (GPT-2).
class LearnedPositionPart final : public PositionPart {
 public:
  using PositionPart::PositionPart;
  void encode(const MH_Tensor&, int64_t, const MH_Tensor&, bool) const override {}
};

// RoPE with base theta (Llama): pairs (i, i + D/2) of each head rotate by
// position * theta^(-2i/D).
class RotaryPositionPart final : public PositionPart {
 public:
  using PositionPart::PositionPart;
  void encode(const MH_Tensor& heads, int64_t first_position, const MH_Tensor& positions,
              bool inverse) const override;
};

}  // namespace mh
