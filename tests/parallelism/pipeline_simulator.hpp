// A test-side executor for pipeline schedules: runs every stage's action
// list together, with point-to-point messages matched in order per
// (sender, receiver) pair and no tags, as the comm ABI does. Compute costs
// one unit per forward of a chunk and two per backward (t_b = 2 t_f);
// transfers are free. It records what a property test needs: whether every
// stage finished, protocol violations, when each forward/backward ran, the
// makespan and the peak number of microbatch-chunks in flight per stage.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace pipesim {

enum class SendMode {
  buffered,    // a send completes at once; the receiver finds it queued
  rendezvous,  // a send completes only when the peer is at the matching receive
};

struct Grid {
  int32_t stages, chunks, microbatches;
};

// (MH_PIPE_FORWARD or MH_PIPE_BACKWARD, microbatch, model chunk)
using ComputeId = std::tuple<int32_t, int32_t, int32_t>;

struct ComputeRecord {
  int32_t runs = 0;
  int64_t start = 0, finish = 0;
};

struct Run {
  bool completed = false;
  std::vector<std::string> violations;
  std::vector<size_t> stopped_at;  // per stage: index of the first action not run
  std::map<ComputeId, ComputeRecord> compute;
  int64_t makespan = 0;
  std::vector<int32_t> peak_in_flight;  // per stage, in microbatch-chunks
};

Run simulate(const Grid& grid, const std::vector<std::vector<MH_PipeAction>>& stages,
             SendMode mode);

}  // namespace pipesim
