// What one micro-batch's forward keeps for backward, per layer, named by
// MH_Activation. Entry LAYER_INPUT of layer l + 1 is layer l's output; the
// extra layer at index `layers` holds the final layernorm's input.
// An empty buffer means "not kept": the engine recomputes it in backward.
#pragma once

#include <megahost/abi.h>

#include <array>
#include <vector>

#include "engine/device.hpp"

namespace mh {

struct LayerActivations {
  std::array<Buffer, MH_ACT_COUNT> slot;

  Buffer& operator[](MH_Activation a) { return slot[a]; }
  bool has(MH_Activation a) const { return bool(slot[a]); }
  bool complete() const {
    for (const auto& b : slot)
      if (!b) return false;
    return true;
  }
  void clear() {
    for (auto& b : slot) b.release();
  }
};

// keep[l][a]: the recompute policy's decision for layer l, activation a.
using KeepTable = std::vector<std::array<bool, MH_ACT_COUNT>>;

}  // namespace mh
