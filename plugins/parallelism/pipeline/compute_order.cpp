// Which FORWARD and BACKWARD a stage runs in which order. All three
// schedules have the same shape -- a warm-up of forwards, a steady phase
// alternating one forward and one backward, a cool-down of backwards -- and
// differ only in the length of the warm-up and in the (microbatch, chunk)
// sequence:
//   GPipe:       warm-up is everything: all forwards, then all backwards.
//   1F1B:        warm-up of p - s - 1 forwards (PipeDream-Flush), so at most
//                p microbatches are in flight on stage 0 instead of m.
//   interleaved: warm-up of 2 (p - s - 1) + (v - 1) p microbatch-chunks;
//                forwards walk groups of p microbatches through chunks
//                0..v-1, backwards walk the same groups through v-1..0
//                (Megatron-LM's interleaved 1F1B).
#include "schedule.hpp"

#include <algorithm>

namespace mh::pipeline {

namespace {

int32_t warmup_length(ScheduleKind kind, const PipelineGrid& grid, int32_t stage) {
  int32_t total = grid.microbatches * grid.chunks;
  int32_t later_stages = grid.stages - stage - 1;
  switch (kind) {
    case ScheduleKind::gpipe: return total;
    case ScheduleKind::one_f_one_b: return std::min(later_stages, total);
    case ScheduleKind::interleaved:
      return std::min(2 * later_stages + (grid.chunks - 1) * grid.stages, total);
  }
  return total;
}

// The i-th forward (or backward) of a stage: microbatches go in groups of p,
// each group through every chunk in turn. Without interleaving this is
// simply microbatch i on chunk 0.
MH_PipeAction nth(const PipelineGrid& grid, int32_t i, bool backward) {
  int32_t per_group = grid.stages * grid.chunks;
  int32_t chunk = (i % per_group) / grid.stages;
  int32_t microbatch = (i / per_group) * grid.stages + i % grid.stages;
  if (backward) chunk = grid.chunks - 1 - chunk;
  return MH_PipeAction{backward ? MH_PIPE_BACKWARD : MH_PIPE_FORWARD, microbatch, chunk, 0};
}

}  // namespace

std::vector<MH_PipeAction> compute_order(ScheduleKind kind, const PipelineGrid& grid,
                                         int32_t stage) {
  int32_t total = grid.microbatches * grid.chunks;
  int32_t warmup = warmup_length(kind, grid, stage);
  std::vector<MH_PipeAction> order;
  order.reserve(2 * static_cast<size_t>(total));
  for (int32_t i = 0; i < warmup; ++i) order.push_back(nth(grid, i, false));
  for (int32_t i = 0; i < total - warmup; ++i) {  // steady 1F1B
    order.push_back(nth(grid, warmup + i, false));
    order.push_back(nth(grid, i, true));
  }
  for (int32_t i = total - warmup; i < total; ++i)
    order.push_back(nth(grid, i, true));  // cool-down
  return order;
}

}  // namespace mh::pipeline
