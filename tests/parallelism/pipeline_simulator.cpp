#include "pipeline_simulator.hpp"

#include <algorithm>
#include <deque>
#include <set>
#include <utility>

namespace pipesim {

namespace {

enum MessageKind { kActivation = 0, kGradient = 1 };

struct Message {
  int32_t kind, microbatch, from_model_chunk;
  int64_t time;
};

std::string name(int32_t kind, int32_t microbatch, int32_t model_chunk) {
  return std::string(kind == kActivation ? "activation" : "gradient") + " of microbatch " +
         std::to_string(microbatch) + " from model chunk " + std::to_string(model_chunk);
}

class Simulator {
 public:
  Simulator(const Grid& grid, const std::vector<std::vector<MH_PipeAction>>& lists, SendMode mode)
      : grid_(grid),
        lists_(lists),
        mode_(mode),
        pc_(lists.size(), 0),
        clock_(lists.size(), 0),
        in_flight_(lists.size(), 0),
        received_(lists.size()) {
    run_.peak_in_flight.assign(lists.size(), 0);
  }

  Run run() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int32_t s = 0; s < grid_.stages; ++s)
        while (pc_[s] < lists_[s].size() && step(s)) moved = true;
    }
    run_.stopped_at = pc_;
    run_.completed = true;
    for (int32_t s = 0; s < grid_.stages; ++s) run_.completed &= pc_[s] == lists_[s].size();
    run_.makespan = *std::max_element(clock_.begin(), clock_.end());
    return run_;
  }

 private:
  int32_t model_chunk(int32_t stage, const MH_PipeAction& a) const {
    return a.chunk * grid_.stages + stage;
  }
  int32_t stage_of(int32_t model_chunk) const { return model_chunk % grid_.stages; }
  int32_t last_model_chunk() const { return grid_.stages * grid_.chunks - 1; }

  void violation(int32_t stage, const std::string& what) {
    run_.violations.push_back("stage " + std::to_string(stage) + " action " +
                              std::to_string(pc_[stage]) + ": " + what);
  }

  // Runs the current action of `stage`; false when it must wait.
  bool step(int32_t s) {
    const MH_PipeAction& a = lists_[s][pc_[s]];
    switch (a.type) {
      case MH_PIPE_FORWARD: compute(s, a, true); return true;
      case MH_PIPE_BACKWARD: compute(s, a, false); return true;
      case MH_PIPE_SEND_ACTIVATION: return send(s, a, kActivation);
      case MH_PIPE_SEND_GRADIENT: return send(s, a, kGradient);
      case MH_PIPE_RECV_ACTIVATION:
      case MH_PIPE_RECV_GRADIENT: return mode_ == SendMode::buffered && receive_queued(s, a);
    }
    violation(s, "unknown action type " + std::to_string(a.type));
    ++pc_[s];
    return true;
  }

  bool done(int32_t type, int32_t microbatch, int32_t k) const {
    auto it = run_.compute.find({type, microbatch, k});
    return it != run_.compute.end() && it->second.runs > 0;
  }

  void compute(int32_t s, const MH_PipeAction& a, bool forward) {
    int32_t k = model_chunk(s, a);
    bool has_input = forward ? k == 0 || received_[s].count({kActivation, a.microbatch, k - 1}) > 0
                             : done(MH_PIPE_FORWARD, a.microbatch, k) &&
                                   (k == last_model_chunk() ||
                                    received_[s].count({kGradient, a.microbatch, k + 1}) > 0);
    if (!has_input)
      violation(s, std::string(forward ? "forward" : "backward") + " of microbatch " +
                       std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk) +
                       " runs before its inputs are there");
    ComputeRecord& r = run_.compute[{a.type, a.microbatch, k}];
    ++r.runs;
    r.start = clock_[s];
    r.finish = clock_[s] += forward ? 1 : 2;
    in_flight_[s] += forward ? 1 : -1;
    run_.peak_in_flight[s] = std::max(run_.peak_in_flight[s], in_flight_[s]);
    ++pc_[s];
  }

  // The model chunk a transfer of `kind` goes to from model chunk k, or -1.
  int32_t destination(int32_t kind, int32_t k) const {
    int32_t to = kind == kActivation ? k + 1 : k - 1;
    return to < 0 || to > last_model_chunk() ? -1 : to;
  }

  bool send(int32_t s, const MH_PipeAction& a, int32_t kind) {
    int32_t k = model_chunk(s, a);
    int32_t to = destination(kind, k);
    if (to < 0) {
      violation(s, "sends the " + name(kind, a.microbatch, k) + " past the end of the model");
      ++pc_[s];
      return true;
    }
    if (!done(kind == kActivation ? MH_PIPE_FORWARD : MH_PIPE_BACKWARD, a.microbatch, k))
      violation(s, "sends the " + name(kind, a.microbatch, k) + " before computing it");
    Message m{kind, a.microbatch, k, clock_[s]};
    if (mode_ == SendMode::buffered) {
      channels_[{s, stage_of(to)}].push_back(m);
      ++pc_[s];
      return true;
    }
    return meet(s, stage_of(to), m);
  }

  // The message `a` on stage `s` waits for, as (kind, microbatch, sender's model chunk).
  std::tuple<int32_t, int32_t, int32_t> expected(int32_t s, const MH_PipeAction& a) const {
    int32_t k = model_chunk(s, a);
    if (a.type == MH_PIPE_RECV_ACTIVATION) return {kActivation, a.microbatch, k - 1};
    return {kGradient, a.microbatch, k + 1};
  }

  void deliver(int32_t s, const MH_PipeAction& a, const Message& m) {
    auto want = expected(s, a);
    auto [kind, microbatch, from] = want;
    if (std::make_tuple(m.kind, m.microbatch, m.from_model_chunk) != want)
      violation(s, "expects the " + name(kind, microbatch, from) + " but receives the " +
                       name(m.kind, m.microbatch, m.from_model_chunk));
    received_[s].insert({m.kind, m.microbatch, m.from_model_chunk});
    clock_[s] = std::max(clock_[s], m.time);
    ++pc_[s];
  }

  bool receive_queued(int32_t s, const MH_PipeAction& a) {
    int32_t from = std::get<2>(expected(s, a));
    if (from < 0 || from > last_model_chunk()) {
      violation(s, "receives from outside the model");
      ++pc_[s];
      return true;
    }
    std::deque<Message>& queue = channels_[{stage_of(from), s}];
    if (queue.empty()) return false;
    deliver(s, a, queue.front());
    queue.pop_front();
    return true;
  }

  // Rendezvous: the send completes only together with the peer's receive.
  bool meet(int32_t s, int32_t peer, Message m) {
    if (pc_[peer] >= lists_[peer].size()) return false;
    const MH_PipeAction& r = lists_[peer][pc_[peer]];
    bool receiving = r.type == MH_PIPE_RECV_ACTIVATION || r.type == MH_PIPE_RECV_GRADIENT;
    if (!receiving || stage_of(std::get<2>(expected(peer, r))) != s) return false;
    m.time = std::max(clock_[s], clock_[peer]);
    clock_[s] = m.time;
    ++pc_[s];
    deliver(peer, r, m);
    return true;
  }

  Grid grid_;
  const std::vector<std::vector<MH_PipeAction>>& lists_;
  SendMode mode_;
  std::vector<size_t> pc_;
  std::vector<int64_t> clock_;
  std::vector<int32_t> in_flight_;
  std::vector<std::set<std::tuple<int32_t, int32_t, int32_t>>> received_;
  std::map<std::pair<int32_t, int32_t>, std::deque<Message>> channels_;
  Run run_;
};

}  // namespace

Run simulate(const Grid& grid, const std::vector<std::vector<MH_PipeAction>>& stages,
             SendMode mode) {
  return Simulator(grid, stages, mode).run();
}

}  // namespace pipesim
