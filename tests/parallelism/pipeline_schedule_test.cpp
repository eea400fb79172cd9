// Specification of the pipeline schedules, checked by running every stage's
// action list together in pipeline_simulator: the lists finish under
// buffered and rendezvous sends, every message meets the receive expecting
// it, every (microbatch, chunk) runs forward and backward once and in
// dependency order, and the bubble and in-flight counts are the papers'.
#include "pipeline_fixture.hpp"
#include "pipeline_simulator.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace {

using pipesim::SendMode;
using pipetest::Pipeline;

struct Config {
  std::string schedule;
  int32_t p, v, m;
};

std::ostream& operator<<(std::ostream& os, const Config& c) {
  return os << c.schedule << "_p" << c.p << "_v" << c.v << "_m" << c.m;
}

// Plans `c` (two layers per model chunk, micro_batch 1, no data parallelism)
// and returns every stage's actions.
std::vector<std::vector<MH_PipeAction>> schedules_for(const Config& c) {
  Pipeline pipe(
      {{"size", int64_t{c.p}}, {"schedule", c.schedule}, {"virtual_stages", int64_t{c.v}}});
  std::string status = pipe.plan_for(pipetest::shape(2 * c.p * c.v, c.m, c.p));
  if (status != "OK") throw std::runtime_error(status);
  return pipe.schedules();
}

pipesim::Run run(const Config& c, SendMode mode) {
  return pipesim::simulate({c.p, c.v, c.m}, schedules_for(c), mode);
}

std::string stuck_at(const pipesim::Run& r) {
  std::string out;
  for (size_t s = 0; s < r.stopped_at.size(); ++s)
    out += " stage " + std::to_string(s) + " stopped at action " + std::to_string(r.stopped_at[s]);
  return out;
}

std::vector<Config> all_configs() {
  std::vector<Config> configs;
  for (const char* schedule : {"gpipe", "1f1b"})
    for (int32_t p : {1, 2, 3, 4, 8})
      for (int32_t m : {1, 2, 3, 4, 7, 8, 16}) configs.push_back({schedule, p, 1, m});
  for (int32_t p : {2, 3, 4, 8})
    for (int32_t v : {2, 3, 4})
      for (int32_t groups : {1, 2, 3}) configs.push_back({"interleaved", p, v, groups * p});
  return configs;
}

std::string trace(const Config& c) {
  std::ostringstream os;
  os << c;
  return os.str();
}

// Runs `check` on every configuration, naming the configuration on failure.
template <class Check>
void for_all_configs(Check check) {
  for (const Config& c : all_configs()) {
    SCOPED_TRACE(trace(c));
    check(c);
  }
}

TEST(PipelineSchedule, FinishesWhenSendsAreBuffered) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::buffered);
    EXPECT_TRUE(r.completed) << stuck_at(r);
  });
}

TEST(PipelineSchedule, FinishesWhenEverySendWaitsForItsReceive) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::rendezvous);
    EXPECT_TRUE(r.completed) << stuck_at(r);
  });
}

TEST(PipelineSchedule, EveryMessageMeetsTheReceiveExpectingIt) {
  for_all_configs([](const Config& c) {
    for (SendMode mode : {SendMode::buffered, SendMode::rendezvous}) {
      pipesim::Run r = run(c, mode);
      EXPECT_TRUE(r.violations.empty()) << r.violations.front();
    }
  });
}

TEST(PipelineSchedule, RunsEachForwardAndBackwardOfEveryMicrobatchAndChunkOnce) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::buffered);
    EXPECT_EQ(r.compute.size(), 2u * c.m * c.p * c.v);
    for (const auto& [id, record] : r.compute) EXPECT_EQ(record.runs, 1);
  });
}

TEST(PipelineSchedule, EachStageRunsAMicrobatchsForwardBeforeItsBackward) {
  for_all_configs([](const Config& c) {
    for (const std::vector<MH_PipeAction>& actions : schedules_for(c)) {
      std::set<std::pair<int32_t, int32_t>> forwarded;
      for (const MH_PipeAction& a : actions) {
        if (a.type == MH_PIPE_FORWARD) forwarded.insert({a.microbatch, a.chunk});
        if (a.type == MH_PIPE_BACKWARD) {
          EXPECT_TRUE(forwarded.count({a.microbatch, a.chunk})) << "backward of " << a.microbatch;
        }
      }
    }
  });
}

TEST(PipelineSchedule, AForwardStartsAfterTheSameMicrobatchLeftThePreviousModelChunk) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::buffered);
    for (int32_t mb = 0; mb < c.m; ++mb)
      for (int32_t k = 1; k < c.p * c.v; ++k)
        EXPECT_GE((r.compute[{MH_PIPE_FORWARD, mb, k}].start),
                  (r.compute[{MH_PIPE_FORWARD, mb, k - 1}].finish));
  });
}

TEST(PipelineSchedule, ABackwardStartsAfterTheSameMicrobatchLeftTheNextModelChunk) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::buffered);
    int32_t last = c.p * c.v - 1;
    for (int32_t mb = 0; mb < c.m; ++mb) {
      EXPECT_GE((r.compute[{MH_PIPE_BACKWARD, mb, last}].start),
                (r.compute[{MH_PIPE_FORWARD, mb, last}].finish));
      for (int32_t k = 0; k < last; ++k)
        EXPECT_GE((r.compute[{MH_PIPE_BACKWARD, mb, k}].start),
                  (r.compute[{MH_PIPE_BACKWARD, mb, k + 1}].finish));
    }
  });
}

// Where each (type, microbatch, chunk) sits in one stage's list, -1 if absent.
class Positions {
 public:
  explicit Positions(const std::vector<MH_PipeAction>& actions) {
    for (size_t i = 0; i < actions.size(); ++i) {
      const MH_PipeAction& a = actions[i];
      EXPECT_TRUE(at_.emplace(std::make_tuple(a.type, a.microbatch, a.chunk), int32_t(i)).second)
          << "listed twice: type " << a.type << " microbatch " << a.microbatch;
    }
  }
  int32_t operator()(int32_t type, int32_t mb, int32_t chunk) const {
    auto it = at_.find({type, mb, chunk});
    return it == at_.end() ? -1 : it->second;
  }

 private:
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> at_;
};

// Each compute whose input crosses a model chunk boundary is preceded by its
// RECV, and each whose output does is followed by its SEND, exactly once.
TEST(PipelineSchedule, ListsTheTransfersOfEveryChunkBoundaryExplicitly) {
  for_all_configs([](const Config& c) {
    std::vector<std::vector<MH_PipeAction>> stages = schedules_for(c);
    int32_t last = c.p * c.v - 1;
    for (int32_t s = 0; s < c.p; ++s) {
      Positions at(stages[s]);
      for (int32_t mb = 0; mb < c.m; ++mb)
        for (int32_t chunk = 0; chunk < c.v; ++chunk) {
          int32_t k = chunk * c.p + s;
          int32_t fwd = at(MH_PIPE_FORWARD, mb, chunk), bwd = at(MH_PIPE_BACKWARD, mb, chunk);
          EXPECT_EQ(at(MH_PIPE_RECV_ACTIVATION, mb, chunk) >= 0, k > 0);
          EXPECT_EQ(at(MH_PIPE_SEND_ACTIVATION, mb, chunk) >= 0, k < last);
          EXPECT_EQ(at(MH_PIPE_RECV_GRADIENT, mb, chunk) >= 0, k < last);
          EXPECT_EQ(at(MH_PIPE_SEND_GRADIENT, mb, chunk) >= 0, k > 0);
          EXPECT_LT(at(MH_PIPE_RECV_ACTIVATION, mb, chunk), fwd);
          EXPECT_LT(fwd, k < last ? at(MH_PIPE_SEND_ACTIVATION, mb, chunk) : INT32_MAX);
          EXPECT_LT(at(MH_PIPE_RECV_GRADIENT, mb, chunk), bwd);
          EXPECT_LT(bwd, k > 0 ? at(MH_PIPE_SEND_GRADIENT, mb, chunk) : INT32_MAX);
        }
    }
  });
}

// [N21]: with t_b = 2 t_f the idle time is (p - 1)(t_f + t_b) for GPipe and
// 1F1B and (p - 1)(t_f + t_b) / v interleaved, so the bubble fraction is
// (p - 1) / (v m).
TEST(PipelineSchedule, BubbleFractionIsPMinusOneOverVM) {
  for_all_configs([](const Config& c) {
    pipesim::Run r = run(c, SendMode::buffered);
    double ideal = 3.0 * c.m * c.v;
    EXPECT_DOUBLE_EQ((static_cast<double>(r.makespan) - ideal) / ideal,
                     double(c.p - 1) / (c.v * c.m));
  });
}

TEST(PipelineScheduleMemory, OneFOneBHoldsPMicrobatchesOnTheFirstStageAndFewerLater) {
  pipesim::Run r = run({"1f1b", 4, 1, 16}, SendMode::buffered);
  EXPECT_EQ(r.peak_in_flight, (std::vector<int32_t>{4, 3, 2, 1}));
}

TEST(PipelineScheduleMemory, GPipeHoldsEveryMicrobatchOnEveryStage) {
  pipesim::Run r = run({"gpipe", 4, 1, 16}, SendMode::buffered);
  EXPECT_EQ(r.peak_in_flight, (std::vector<int32_t>{16, 16, 16, 16}));
}

// [K22] 4.2.3: the first stage stores activations of L (1 + (p - 1) / (p v))
// layers, i.e. v p + p - 1 microbatch-chunks of L / (p v) layers each.
TEST(PipelineScheduleMemory, InterleavedFirstStageHoldsOnePlusPMinusOneOverPVTimesTheLayers) {
  pipesim::Run r = run({"interleaved", 4, 3, 16}, SendMode::buffered);
  EXPECT_EQ(r.peak_in_flight[0], 3 * 4 + 4 - 1);
}

std::string compute_order(const std::vector<MH_PipeAction>& actions) {
  std::string out;
  for (const MH_PipeAction& a : actions) {
    if (a.type != MH_PIPE_FORWARD && a.type != MH_PIPE_BACKWARD) continue;
    if (!out.empty()) out += ' ';
    out += a.type == MH_PIPE_FORWARD ? 'F' : 'B';
    out += std::to_string(a.microbatch);
    if (a.chunk > 0) out += '.' + std::to_string(a.chunk);
  }
  return out;
}

TEST(PipelineScheduleOrder, OneFOneBWarmsUpWithPMinusSMinusOneForwardsThenAlternates) {
  std::vector<std::vector<MH_PipeAction>> stages = schedules_for({"1f1b", 4, 1, 8});
  EXPECT_EQ(compute_order(stages[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(compute_order(stages[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(PipelineScheduleOrder, GPipeRunsAllForwardsThenAllBackwards) {
  std::vector<std::vector<MH_PipeAction>> stages = schedules_for({"gpipe", 2, 1, 4});
  EXPECT_EQ(compute_order(stages[1]), "F0 F1 F2 F3 B0 B1 B2 B3");
}

// Megatron-LM: groups of p microbatches walk chunks 0..v-1 forward and
// v-1..0 backward; stage s warms up with 2 (p - s - 1) + (v - 1) p.
TEST(PipelineScheduleOrder, InterleavedWalksGroupsOfPMicrobatchesThroughTheChunks) {
  std::vector<std::vector<MH_PipeAction>> stages = schedules_for({"interleaved", 2, 2, 4});
  EXPECT_EQ(compute_order(stages[0]),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(compute_order(stages[1]),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
}

TEST(PipelineScheduleOrder, OneStageNeedsNoTransfers) {
  std::vector<std::vector<MH_PipeAction>> stages = schedules_for({"1f1b", 1, 1, 3});
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].size(), 6u);
  EXPECT_EQ(compute_order(stages[0]), "F0 B0 F1 B1 F2 B2");
}

}  // namespace
