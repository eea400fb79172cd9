// Places the point-to-point transfers into each stage's compute order.
//
// A unit-time run of the whole pipeline (forward 1, backward 2, transfers
// free) gives every FORWARD and BACKWARD a start time and every message the
// time its producer finishes. Each stage then lists its actions sorted by
// one global key: time, messages before compute at equal times, and ties
// between messages broken by the message itself. Both ends of a message use
// the same key, so
//  - a SEND follows the compute that produced its tensor and a RECV precedes
//    the compute that consumes it;
//  - running all transfers in key order is a valid execution in which every
//    send meets its receive, so no stage can deadlock even if sends block
//    until received (rendezvous), let alone when they are buffered;
//  - messages between one pair of stages (with p = 2 and interleaving that
//    mixes activations and gradients) are received in the order sent.
#include "schedule.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <string>
#include <tuple>

namespace mh::pipeline {

namespace {

constexpr int64_t kForwardTime = 1;
constexpr int64_t kBackwardTime = 2;

// Finish times of each (microbatch, model chunk) forward and backward in the
// unit-time run, -1 while not run yet.
class Timeline {
 public:
  Timeline(const PipelineGrid& grid, const std::vector<std::vector<MH_PipeAction>>& orders)
      : grid_(grid), forward_(cells(grid), -1), backward_(cells(grid), -1), start_(orders.size()) {
    run(orders);
  }

  int64_t forward_done(int32_t microbatch, int32_t model_chunk) const {
    return forward_[cell(microbatch, model_chunk)];
  }
  int64_t backward_done(int32_t microbatch, int32_t model_chunk) const {
    return backward_[cell(microbatch, model_chunk)];
  }
  // Start time of the i-th compute action of `stage`.
  int64_t start(int32_t stage, size_t i) const { return start_[stage][i]; }

 private:
  static size_t cells(const PipelineGrid& g) {
    return static_cast<size_t>(g.microbatches) * static_cast<size_t>(g.model_chunks());
  }
  size_t cell(int32_t microbatch, int32_t model_chunk) const {
    return static_cast<size_t>(microbatch) * static_cast<size_t>(grid_.model_chunks()) +
           static_cast<size_t>(model_chunk);
  }

  // When the input of `a` on `stage` is ready, or -1 if not yet produced.
  int64_t input_ready(const MH_PipeAction& a, int32_t stage) const {
    int32_t k = a.chunk * grid_.stages + stage;
    if (a.type == MH_PIPE_FORWARD) return k == 0 ? 0 : forward_done(a.microbatch, k - 1);
    if (forward_done(a.microbatch, k) < 0) return -1;
    return k == grid_.model_chunks() - 1 ? 0 : backward_done(a.microbatch, k + 1);
  }

  // Runs one stage as far as its inputs allow; returns whether it moved.
  bool advance(int32_t stage, const std::vector<MH_PipeAction>& order, size_t& next,
               int64_t& clock) {
    size_t before = next;
    while (next < order.size()) {
      const MH_PipeAction& a = order[next];
      int64_t ready = input_ready(a, stage);
      if (ready < 0) break;
      bool forward = a.type == MH_PIPE_FORWARD;
      start_[stage].push_back(std::max(clock, ready));
      clock = start_[stage].back() + (forward ? kForwardTime : kBackwardTime);
      (forward ? forward_ : backward_)[cell(a.microbatch, a.chunk * grid_.stages + stage)] = clock;
      ++next;
    }
    return next != before;
  }

  void run(const std::vector<std::vector<MH_PipeAction>>& orders) {
    std::vector<size_t> next(orders.size(), 0);
    std::vector<int64_t> clock(orders.size(), 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (int32_t s = 0; s < grid_.stages; ++s) moved |= advance(s, orders[s], next[s], clock[s]);
    }
    for (int32_t s = 0; s < grid_.stages; ++s)
      require(next[s] == orders[s].size(),
              "pipeline schedule stalls on stage " + std::to_string(s) + " at action " +
                  std::to_string(next[s]),
              MH_INTERNAL);
  }

  PipelineGrid grid_;
  std::vector<int64_t> forward_;
  std::vector<int64_t> backward_;
  std::vector<std::vector<int64_t>> start_;
};

// (time, 0 for a message / 1 for compute, message kind, microbatch, sending
// model chunk): the global order every stage lists its actions in.
using Key = std::tuple<int64_t, int32_t, int32_t, int32_t, int32_t>;

struct Keyed {
  Key key;
  MH_PipeAction action;
  bool operator<(const Keyed& o) const { return key < o.key; }
};

MH_PipeAction with_type(MH_PipeAction a, MH_PipeActionType type) {
  a.type = type;
  return a;
}

// The transfers that feed and follow one compute action of `stage`. A
// message is named by its kind (0 activation, 1 gradient), microbatch and
// the model chunk that sends it.
void add_transfers(const PipelineGrid& grid, const Timeline& t, int32_t stage,
                   const MH_PipeAction& a, std::vector<Keyed>& out) {
  int32_t k = a.chunk * grid.stages + stage;
  int32_t last = grid.model_chunks() - 1;
  int32_t mb = a.microbatch;
  auto transfer = [&](MH_PipeActionType type, int64_t time, int32_t kind, int32_t sender) {
    out.push_back({{time, 0, kind, mb, sender}, with_type(a, type)});
  };
  if (a.type == MH_PIPE_FORWARD) {
    if (k > 0) transfer(MH_PIPE_RECV_ACTIVATION, t.forward_done(mb, k - 1), 0, k - 1);
    if (k < last) transfer(MH_PIPE_SEND_ACTIVATION, t.forward_done(mb, k), 0, k);
  } else {
    if (k < last) transfer(MH_PIPE_RECV_GRADIENT, t.backward_done(mb, k + 1), 1, k + 1);
    if (k > 0) transfer(MH_PIPE_SEND_GRADIENT, t.backward_done(mb, k), 1, k);
  }
}

std::vector<MH_PipeAction> list_in_key_order(const PipelineGrid& grid, const Timeline& t,
                                             int32_t stage,
                                             const std::vector<MH_PipeAction>& order) {
  std::vector<Keyed> keyed;
  keyed.reserve(2 * order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    keyed.push_back({{t.start(stage, i), 1, 0, 0, 0}, order[i]});
    add_transfers(grid, t, stage, order[i], keyed);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<MH_PipeAction> actions;
  actions.reserve(keyed.size());
  for (const Keyed& k : keyed) actions.push_back(k.action);
  return actions;
}

}  // namespace

std::vector<std::vector<MH_PipeAction>> stage_actions(ScheduleKind kind, const PipelineGrid& grid) {
  std::vector<std::vector<MH_PipeAction>> orders;
  for (int32_t s = 0; s < grid.stages; ++s) orders.push_back(compute_order(kind, grid, s));
  Timeline timeline(grid, orders);
  std::vector<std::vector<MH_PipeAction>> actions;
  for (int32_t s = 0; s < grid.stages; ++s)
    actions.push_back(list_in_key_order(grid, timeline, s, orders[s]));
  return actions;
}

}  // namespace mh::pipeline
