#include "checkpoint/rank_state.hpp"

#include <algorithm>

namespace mh::ckpt {
namespace {

// Whether this rank is the one writer of parameter `p`'s values among the
// ranks that hold the same elements.
bool writes(const ParamSet& params, const ParamInfo& p, int id, const RankRole& role, bool replicated_over_data) {
  // Expert weights are whole on each rank, and the ranks holding the same
  // experts, tensor ranks among them, are one expert-data group.
  const bool expert = p.group == ParamGroup::kExpertDecay;
  if (replicated_over_data && (expert ? role.expert_data_rank : role.dp_rank) != 0) return false;
  if (p.shard == MH_SHARD_NONE && !expert && role.tp_rank != 0) return false;
  // The first stage writes the tied embedding, not the last stage's copy.
  return id != params.wte() || !params.embedding_copy();
}

void add_state(std::vector<Region>& out, const std::string& prefix, const ParamInfo& p, const Rect& shard,
               float* moment, const Optimizer::Piece& piece) {
  const int64_t begin = std::max(piece.flat, p.offset), end = std::min(piece.flat + piece.count, p.offset + p.numel());
  if (begin >= end) return;
  for (const auto& [rect, first] : rects_of_range(shard, begin - p.offset, end - p.offset))
    out.push_back(Region{prefix + p.name, {p.global_rows, p.global_cols}, rect,
                         moment + piece.local + (p.offset + first - piece.flat)});
}

// The regions of `p` in the optimizer's owned pieces of `base` (its moments,
// or the master weights it keeps).
std::vector<Region> owned_regions(const Optimizer& optimizer, const std::string& prefix, const ParamInfo& p,
                                  const Rect& shard, float* base) {
  std::vector<Region> mine;
  for (const Optimizer::Piece& piece : optimizer.owned()) add_state(mine, prefix, p, shard, base, piece);
  return mine;
}

}  // namespace

Rect shard_rect(const ParamInfo& p) { return Rect{p.row0, p.col0, p.rows, p.cols}; }

std::vector<std::pair<Rect, int64_t>> rects_of_range(const Rect& shard, int64_t begin, int64_t end) {
  std::vector<std::pair<Rect, int64_t>> out;
  const int64_t cols = shard.cols;
  if (begin < end && begin % cols != 0) {
    const int64_t n = std::min(cols - begin % cols, end - begin);
    out.push_back({Rect{shard.row + begin / cols, shard.col + begin % cols, 1, n}, begin});
    begin += n;
  }
  if (const int64_t rows = (end - begin) / cols; rows > 0) {
    out.push_back({Rect{shard.row + begin / cols, shard.col, rows, cols}, begin});
    begin += rows * cols;
  }
  if (begin < end) out.push_back({Rect{shard.row + begin / cols, shard.col, 1, end - begin}, begin});
  return out;
}

RankState rank_state(const ParamSet& params, const Optimizer& optimizer, const RankRole& role, bool save_moments) {
  RankState s;
  const auto& infos = params.infos();
  auto add = [&](std::vector<Region> regions, bool written) {
    s.held.insert(s.held.end(), regions.begin(), regions.end());
    if (written) s.written.insert(s.written.end(), regions.begin(), regions.end());
  };
  // Under LoRA only the adapters train: a checkpoint holds them alone, and
  // its metadata names the base they adapt.
  for (size_t id = 0; id < infos.size(); ++id) {
    const ParamInfo& p = infos[id];
    if (!params.trainable(int(id))) continue;
    const Rect shard = shard_rect(p);
    if (params.holds_master())
      add({Region{p.name, {p.global_rows, p.global_cols}, shard, params.value(int(id))}},
          writes(params, p, int(id), role, true));
    else  // the distributed optimizer keeps them: each replica its pieces
      add(owned_regions(optimizer, "", p, shard, optimizer.master()), writes(params, p, int(id), role, false));
  }
  for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
    float* base = std::string(moment) == "exp_avg" ? optimizer.exp_avg() : optimizer.exp_avg_sq();
    const std::string prefix = std::string("optimizer.") + moment + ".";
    for (size_t id = 0; id < infos.size(); ++id) {
      const ParamInfo& p = infos[id];
      add(owned_regions(optimizer, prefix, p, shard_rect(p), base),
          save_moments && writes(params, p, int(id), role, !role.distributed_optimizer));
    }
  }
  return s;
}

}  // namespace mh::ckpt
