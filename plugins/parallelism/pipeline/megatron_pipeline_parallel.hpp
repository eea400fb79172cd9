// Megatron pipeline parallelism as a plan: which layers each stage (and
// virtual chunk) owns, and each stage's ordered list of forwards, backwards
// and point-to-point transfers for GPipe, 1F1B (PipeDream-Flush) or
// interleaved 1F1B. docs/parallelism.md has the diagrams.
#pragma once

#include "plan_checks.hpp"
#include "schedule.hpp"

#include <megahost/plugin.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mh::pipeline {

inline constexpr int64_t kMaxSize = 4096;

inline constexpr MH_OptionSpec kOptions[] = {
    opt_int("size", "1", 1, kMaxSize, "pipeline stages p"),
    opt_choice("schedule", "\"1f1b\"", "gpipe|1f1b|interleaved",
               "gpipe (all forwards, then all backwards), 1f1b (PipeDream-Flush) or interleaved "
               "1F1B over virtual_stages model chunks per stage"),
    opt_int("virtual_stages", "1", 1, 1024,
            "model chunks per stage v; more than 1 only with the interleaved schedule"),
    opt("layers_per_stage", MH_VALUE_STRING, "\"\"",
        "\"\" splits the layers evenly; else a comma list of layer counts, one per model chunk in "
        "model order (one per stage without interleaving), e.g. \"3,5\""),
};

class MegatronPipelineParallel {
 public:
  static constexpr MH_Kind kind = MH_KIND_PIPELINE_PARALLEL;

  explicit MegatronPipelineParallel(const CreateContext& ctx);

  // Assigns layers to stages and builds every stage's schedule, or throws
  // MH_INVALID_ARGUMENT listing every reason the combination is impossible.
  void plan(const MH_PipelinePlanArgs& args, MH_PipelinePlan& out);
  std::span<const MH_PipeAction> schedule(int32_t stage) const;

 private:
  struct Keys {
    std::string size, schedule, virtual_stages, layers_per_stage;
  };

  void check_options(plan::Problems& problems) const;
  int32_t microbatches(const MH_ModelShape& shape, int32_t data_parallel,
                       plan::Problems& problems) const;
  std::vector<int32_t> layer_counts(const MH_ModelShape& shape, plan::Problems& problems) const;
  std::string chunk_count_phrase() const;
  const char* chunk_noun() const;

  Keys keys_;
  int32_t stages_;
  int32_t chunks_;
  std::string schedule_name_;
  ScheduleKind kind_;
  std::string layers_text_;
  std::vector<int32_t> explicit_counts_;

  std::vector<MH_StageLayers> layers_;
  std::vector<std::vector<MH_PipeAction>> actions_;
};

// The "megatron" component of kind MH_KIND_PIPELINE_PARALLEL.
MH_ComponentDesc megatron_component();

}  // namespace mh::pipeline
