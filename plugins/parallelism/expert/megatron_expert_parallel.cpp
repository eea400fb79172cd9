#include "megatron_expert_parallel.hpp"

#include "plan_checks.hpp"

namespace mh::expert {

MegatronExpertParallel::MegatronExpertParallel(const CreateContext& ctx)
    : size_key_(ctx.options.key("size")), size_(static_cast<int32_t>(ctx.options.get_int("size"))) {}

void MegatronExpertParallel::plan(const MH_ExpertPlanArgs& args, MH_ExpertPlan& out) const {
  const int64_t experts = args.experts;
  const int32_t data_parallel = args.data_parallel;
  require(data_parallel >= 1, "the data-parallel size must be at least 1 (got " + std::to_string(data_parallel) + ")");
  plan::Problems problems;
  if (size_ > 1 && experts == 0)
    problems.add(size_key_ + " = " + std::to_string(size_) +
                 " needs a mixture-of-experts model; set model.experts, or " + size_key_ + " = 1");
  if (experts > 0 && experts % size_ != 0)
    problems.add(plan::does_not_divide(size_key_, size_, "model.experts", experts, kMaxSize));
  if (data_parallel % size_ != 0)
    problems.add(plan::does_not_divide(size_key_, size_, "the data-parallel x context x tensor size", data_parallel,
                                       kMaxSize) +
                 " (the expert-parallel ranks are a stage's data-parallel, context and tensor ranks: world / "
                 "pipeline)");
  problems.raise();
  out.size = size_;
  out.experts_per_rank = static_cast<int32_t>(experts / size_);
  out.expert_data_parallel = data_parallel / size_;
}

MH_ComponentDesc megatron_component() {
  return component<MegatronExpertParallel>(
      "megatron", "1.0.0",
      "Megatron expert parallelism: experts spread over data-parallel ranks, tokens dispatched by all-to-all",
      kOptions);
}

}  // namespace mh::expert
