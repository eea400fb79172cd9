// The "grid" tuner: every combination of the [tuner] search lists, priced by
// a cost model of megahost's engine on a hardware profile (training or
// inference), fitted against the exact per-rank memory of the host's dry
// runs, ranked for the goal; the best few re-ranked by real runs.
#pragma once

#include <megahost/plugin.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inference_cost.hpp"
#include "layout.hpp"
#include "machine.hpp"
#include "search_space.hpp"

namespace mh::tuner {

enum class Goal { kTrainThroughput, kInferenceLatency, kInferenceThroughput };

class GridTuner {
 public:
  static constexpr MH_Kind kind = MH_KIND_TUNER;
  static const MH_OptionSpec kOptions[];
  static const size_t kNumOptions;

  explicit GridTuner(const CreateContext& ctx);

  void needs(MH_TunerNeeds& out) const;
  void recompute_policies(std::span<const char* const> names);
  void begin(const MH_ModelShape& shape, const MH_Hardware& hardware);
  bool next(const MH_ModelShape& shape, MH_Candidate& out);
  void report(const MH_Candidate& candidate, const MH_Estimate& estimate);
  std::span<const MH_TunerResult> results();

 private:
  struct Entry {
    Layout layout;
    MH_Candidate candidate{};
    std::vector<std::string> problems;
    bool estimated = false, fits = false, memory_measured = false;
    std::string failure;
    uint64_t memory = 0, capacity = 0;
    double predicted = 0, measured = 0, latency = 0, tokens_per_s = 0;
  };

  bool training() const { return goal_ == Goal::kTrainThroughput; }
  // Training is priced once the host reports the candidate's keep table.
  void predict(Entry& e, const KeepTable& keep = {}) const;
  double seconds(const Entry& e) const;  // the ranking value: measured, else predicted
  bool better(const Entry& a, const Entry& b) const;
  std::string rejection(const Entry& e) const;
  std::string behind(const Entry& e, const Entry& best) const;
  MH_TunerResult row(const Entry& e, int32_t verdict, int32_t rank, const std::string& reason);
  Entry* find(const MH_Candidate& c);

  // Options, read at create (their view is borrowed for that call only).
  Goal goal_;
  std::string cluster_, inference_batches_;
  int32_t nodes_, gpus_per_node_, top_k_, measure_steps_;
  double tokens_;
  bool scatter_gather_;
  SearchLists lists_;
  std::vector<std::string> policies_;  // the host's recompute policies (ABI 1.4)
  InferenceRequest request_;
  std::optional<Machine> machine_;
  Model model_{};
  int32_t per_node_ = 0, devices_ = 0;  // devices (ranks on a CPU) per node, in all
  std::vector<Entry> entries_;
  size_t cursor_ = 0;
  Entry* current_ = nullptr;
  std::vector<MH_TunerResult> rows_;
  std::vector<std::string> reasons_;
};

}  // namespace mh::tuner
