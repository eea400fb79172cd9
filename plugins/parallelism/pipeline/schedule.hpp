// Pipeline schedules as data: which FORWARD and BACKWARD each stage runs in
// which order (GPipe, 1F1B, interleaved 1F1B), and each stage's complete
// action list with the point-to-point transfers placed between them.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <vector>

namespace mh::pipeline {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };

// p stages, v model chunks per stage, m microbatches. Stage s, chunk c holds
// model chunk c * p + s (Narayanan et al. 2021), so model chunk k lives on
// stage k % p as its chunk k / p.
struct PipelineGrid {
  int32_t stages;
  int32_t chunks;
  int32_t microbatches;

  int32_t model_chunks() const { return stages * chunks; }
};

// The FORWARD and BACKWARD actions of `stage` in the order it runs them.
// Interleaved requires m to be a multiple of p.
std::vector<MH_PipeAction> compute_order(ScheduleKind kind, const PipelineGrid& grid,
                                         int32_t stage);

// Every stage's action list: its compute order with a RECV before each
// FORWARD/BACKWARD whose input comes from another model chunk and a SEND
// after each whose output goes to one. All lists order their transfers by
// one global order, so the lists run without deadlock even when a send
// blocks until the peer receives (rendezvous), and messages between two
// stages are received in the order they were sent.
std::vector<std::vector<MH_PipeAction>> stage_actions(ScheduleKind kind, const PipelineGrid& grid);

}  // namespace mh::pipeline
