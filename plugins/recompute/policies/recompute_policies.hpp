// Megatron's activation recomputation policies: for each activation a
// transformer layer would keep for backward, keep it or recompute it from
// what is kept.
//   none:      keep everything.
//   full:      checkpoint layer inputs and recompute whole layers
//              (--recompute-granularity full), uniform or block.
//   selective: recompute only the attention core -- QK^T, softmax and its
//              dropout -- whose memory grows with s^2 but whose FLOPs are
//              few (Korthikanti et al. 2022, --recompute-granularity selective).
#pragma once

#include <megahost/plugin.hpp>

#include <cstdint>

namespace mh::recompute {

inline constexpr MH_OptionSpec kFullOptions[] = {
    opt_choice(
        "method", "\"uniform\"", "uniform|block",
        "uniform: checkpoint the input of every group of num_layers layers and recompute the "
        "group; block: checkpoint and recompute only the first num_layers layers"),
    opt_int("num_layers", "1", 1, 1 << 20,
            "layers per recomputed group (uniform) or recomputed layers (block), counted within "
            "each pipeline stage, or each model chunk with interleaving"),
};

class KeepEverything {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  explicit KeepEverything(const CreateContext&) {}
  MH_Decision decide(const MH_RecomputeQuery& query) const;
};

class FullRecompute {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  explicit FullRecompute(const CreateContext& ctx);
  MH_Decision decide(const MH_RecomputeQuery& query) const;

 private:
  bool checkpointed(int32_t position) const;
  bool recomputed(int32_t position) const;

  bool uniform_;
  int32_t num_layers_;
};

class SelectiveRecompute {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  explicit SelectiveRecompute(const CreateContext&) {}
  MH_Decision decide(const MH_RecomputeQuery& query) const;
};

// The "none", "full" and "selective" components of kind MH_KIND_RECOMPUTE.
MH_ComponentDesc none_component();
MH_ComponentDesc full_component();
MH_ComponentDesc selective_component();

}  // namespace mh::recompute
