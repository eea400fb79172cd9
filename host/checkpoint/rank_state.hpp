// What one rank holds of the global tensors a checkpoint stores: every
// parameter's shard (the f32 master weights; only the pieces it updates
// when the distributed optimizer keeps them) and AdamW's moments of the
// pieces it updates, each as rectangles of the global tensor over
// contiguous device memory. Saving writes the regions the rank is the one
// writer of; loading fills every region the rank holds, from whatever
// layout wrote them — resharding is only this change of rectangles.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/metadata.hpp"
#include "engine/optimizer.hpp"
#include "engine/params.hpp"

namespace mh::ckpt {

struct Region {
  std::string tensor;            // "layers.3.qkv_w", "optimizer.exp_avg.layers.3.qkv_w"
  std::array<int64_t, 2> shape;  // the global tensor's
  Rect rect;                     // the part held here
  float* data;                   // rect.numel() floats, row-major, on the device
};

// Where the rank sits, for choosing one writer of each replicated element:
// data-parallel replicas, tensor-parallel copies of unsharded parameters
// and the tied embedding's copy on the last pipeline stage all hold what
// another rank writes.
struct RankRole {
  int32_t tp_rank = 0, dp_rank = 0;
  bool distributed_optimizer = false;
  // Among the ranks holding the same experts (parallel.expert): the rank's
  // place among the stage's data x context x tensor ranks / ep.
  int32_t expert_data_rank = 0;
};

struct RankState {
  std::vector<Region> held;     // everything the rank holds (what it loads)
  std::vector<Region> written;  // the part of it this rank saves
};

// The rectangle of the global tensor that the rank holds of `p`.
Rect shard_rect(const ParamInfo& p);

// `save_moments` false leaves AdamW's moments out of what the rank writes
// (checkpoint.save_optimizer = false); it still holds and loads them.
RankState rank_state(const ParamSet& params, const Optimizer& optimizer, const RankRole& role, bool save_moments);

// The rectangles of a shard at `shard` covered by its row-major elements
// [begin, end), each with the element it starts at: a partial first row,
// whole rows, a partial last row.
std::vector<std::pair<Rect, int64_t>> rects_of_range(const Rect& shard, int64_t begin, int64_t end);

}  // namespace mh::ckpt
