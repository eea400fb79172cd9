#include "megatron_pipeline_parallel.hpp"

#include "layer_split.hpp"

#include <algorithm>
#include <string>

namespace mh::pipeline {

namespace {

ScheduleKind kind_of(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "interleaved") return ScheduleKind::interleaved;
  return ScheduleKind::one_f_one_b;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

size_t entries_in(const std::string& list) {
  return static_cast<size_t>(std::count(list.begin(), list.end(), ',')) + 1;
}

}  // namespace

MegatronPipelineParallel::MegatronPipelineParallel(const CreateContext& ctx)
    : keys_{ctx.options.key("size"), ctx.options.key("schedule"), ctx.options.key("virtual_stages"),
            ctx.options.key("layers_per_stage")},
      stages_(static_cast<int32_t>(ctx.options.get_int("size"))),
      chunks_(static_cast<int32_t>(ctx.options.get_int("virtual_stages"))),
      schedule_name_(ctx.options.get_string("schedule")),
      kind_(kind_of(schedule_name_)),
      layers_text_(ctx.options.get_string("layers_per_stage")) {
  plan::Problems problems;
  if (!layers_text_.empty())
    explicit_counts_ = parse_layer_counts(layers_text_, keys_.layers_per_stage, problems);
  check_options(problems);
  problems.raise();
}

const char* MegatronPipelineParallel::chunk_noun() const {
  return chunks_ > 1 ? "model chunk" : "stage";
}

// "4 stages (parallel.pipeline.size = 4)" or, interleaved,
// "8 model chunks (parallel.pipeline.size * virtual_stages = 4 * 2)".
std::string MegatronPipelineParallel::chunk_count_phrase() const {
  std::string count = std::to_string(stages_ * chunks_) + " " + chunk_noun() + "s (" + keys_.size;
  if (chunks_ == 1) return count + " = " + std::to_string(stages_) + ")";
  return count + " * virtual_stages = " + std::to_string(stages_) + " * " +
         std::to_string(chunks_) + ")";
}

// Combinations of options that no model shape can make work.
void MegatronPipelineParallel::check_options(plan::Problems& problems) const {
  bool interleaved = kind_ == ScheduleKind::interleaved;
  if (chunks_ > 1 && !interleaved)
    problems.add(keys_.virtual_stages + " = " + std::to_string(chunks_) + " needs " +
                 keys_.schedule + " = \"interleaved\" (it is " + quoted(schedule_name_) + ")");
  if (interleaved && chunks_ == 1)
    problems.add(keys_.schedule + " = \"interleaved\" needs " + keys_.virtual_stages +
                 " >= 2 model chunks per stage; with one chunk per stage use \"1f1b\"");
  if (interleaved && stages_ == 1)
    problems.add(keys_.schedule + " = \"interleaved\" needs " + keys_.size + " >= 2 stages");
  size_t wanted = static_cast<size_t>(stages_) * static_cast<size_t>(chunks_);
  if (!layers_text_.empty() && entries_in(layers_text_) != wanted)
    problems.add(keys_.layers_per_stage + " = " + quoted(layers_text_) + " lists " +
                 std::to_string(entries_in(layers_text_)) + " entries but there are " +
                 chunk_count_phrase() + "; give one per " + chunk_noun() +
                 (chunks_ > 1 ? ", in model order" : ""));
}

// m = global_batch / (micro_batch * d), which must be whole (and, for the
// interleaved schedule, a multiple of p); 0 when it is not.
int32_t MegatronPipelineParallel::microbatches(const MH_ModelShape& shape, int32_t data_parallel,
                                               plan::Problems& problems) const {
  if (shape.micro_batch < 1 || data_parallel < 1) {
    problems.add("train.micro_batch = " + std::to_string(shape.micro_batch) +
                 " and the data-parallel size = " + std::to_string(data_parallel) +
                 " must both be at least 1");
    return 0;
  }
  int64_t per_step = shape.micro_batch * data_parallel;
  std::string ratio = "train.global_batch / (train.micro_batch * data-parallel size) = " +
                      std::to_string(shape.global_batch) + " / (" +
                      std::to_string(shape.micro_batch) + " * " + std::to_string(data_parallel) +
                      ")";
  if (shape.global_batch % per_step != 0) {
    problems.add("the microbatch count m = " + ratio + " is not a whole number; make " +
                 "train.global_batch a multiple of " + std::to_string(per_step));
    return 0;
  }
  int32_t m = static_cast<int32_t>(shape.global_batch / per_step);
  if (kind_ == ScheduleKind::interleaved && m % stages_ != 0)
    problems.add("the interleaved schedule needs the microbatch count m = " + ratio + " = " +
                 std::to_string(m) + " to be a multiple of " + keys_.size + " = " +
                 std::to_string(stages_));
  return m;
}

// Layers per model chunk: the explicit list, or an even split.
std::vector<int32_t> MegatronPipelineParallel::layer_counts(const MH_ModelShape& shape,
                                                            plan::Problems& problems) const {
  std::string layers = "model.layers = " + std::to_string(shape.layers);
  if (!explicit_counts_.empty()) {
    int64_t sum = 0;
    for (int32_t c : explicit_counts_) sum += c;
    if (sum != shape.layers)
      problems.add(keys_.layers_per_stage + " = " + quoted(layers_text_) + " sums to " +
                   std::to_string(sum) + " layers but " + layers);
    return explicit_counts_;
  }
  int32_t chunks = stages_ * chunks_;
  if (shape.layers < chunks)
    problems.add(layers + " cannot fill " + chunk_count_phrase() + ": every " + chunk_noun() +
                 " needs at least one layer");
  else if (shape.layers % chunks != 0)
    problems.add(layers + " does not split evenly over " + chunk_count_phrase() + "; set " +
                 keys_.layers_per_stage + " for an uneven split, e.g. " +
                 quoted(format_layer_counts(even_split(shape.layers, chunks))));
  return even_split(shape.layers, chunks);
}

void MegatronPipelineParallel::plan(const MH_PipelinePlanArgs& args, MH_PipelinePlan& out) {
  const MH_ModelShape& shape = plan::shape_of(args, "MH_PipelinePlanArgs");
  plan::Problems problems;
  if (shape.world_size % stages_ != 0)
    problems.add(
        plan::does_not_divide(keys_.size, stages_, "the world size", shape.world_size, kMaxSize));
  int32_t m = microbatches(shape, args.data_parallel, problems);
  std::vector<int32_t> counts = layer_counts(shape, problems);
  problems.raise();

  layers_ = assign_layers(counts, stages_);
  actions_ = stage_actions(kind_, PipelineGrid{stages_, chunks_, m});
  out.size = stages_;
  out.virtual_stages = chunks_;
  out.microbatches = m;
  out.layers = layers_.data();
  out.num_layers = layers_.size();
}

std::span<const MH_PipeAction> MegatronPipelineParallel::schedule(int32_t stage) const {
  require(!actions_.empty(), "schedule(stage) called before a successful plan", MH_INTERNAL);
  require(stage >= 0 && stage < stages_, "stage " + std::to_string(stage) + " is outside the " +
                                             std::to_string(stages_) + " pipeline stages");
  return actions_[static_cast<size_t>(stage)];
}

MH_ComponentDesc megatron_component() {
  return component<MegatronPipelineParallel>(
      "megatron", "1.0.0",
      "Megatron pipeline parallelism: even or explicit layer split, GPipe, 1F1B or interleaved "
      "1F1B schedules with explicit send/recv",
      kOptions);
}

}  // namespace mh::pipeline
