#include "megatron_data_parallel.hpp"

#include <cmath>
#include <string>

namespace mh::data {

namespace {
constexpr double kBytesPerMiB = 1024.0 * 1024.0;
}  // namespace

std::vector<int32_t> assign_buckets(std::span<const uint64_t> param_bytes, uint64_t bucket_bytes) {
  std::vector<int32_t> bucket_of;
  bucket_of.reserve(param_bytes.size());
  int32_t bucket = 0;
  uint64_t filled = 0;
  for (uint64_t bytes : param_bytes) {
    bucket_of.push_back(bucket);
    filled += bytes;
    if (filled >= bucket_bytes) {
      ++bucket;
      filled = 0;
    }
  }
  return bucket_of;
}

MegatronDataParallel::MegatronDataParallel(const CreateContext& ctx)
    : distributed_optimizer_(ctx.options.get_bool("distributed_optimizer")),
      overlap_(ctx.options.get_bool("overlap_grad_reduce")),
      overlap_param_gather_(ctx.options.get_bool("overlap_param_gather")),
      bucket_bytes_(
          static_cast<uint64_t>(std::llround(ctx.options.get_double("bucket_mb") * kBytesPerMiB))) {
  // As Megatron asserts: the gather is the distributed optimizer's, per
  // bucket of the overlapped reduction.
  require(!overlap_param_gather_ || (distributed_optimizer_ && overlap_),
          "parallel.data.overlap_param_gather = true needs distributed_optimizer = true and "
          "overlap_grad_reduce = true (it gathers the sharded parameters bucket by bucket); set both, "
          "or turn overlap_param_gather off",
          MH_INVALID_ARGUMENT);
}

void MegatronDataParallel::plan(const MH_DataPlanArgs& args, MH_DataPlan& out) {
  require(args.data_parallel >= 1,
          "the data-parallel size must be at least 1 (got " + std::to_string(args.data_parallel) + ")");
  require(args.num_params == 0 || args.param_bytes != nullptr, "MH_DataPlanArgs.param_bytes is NULL");
  bucket_of_ = assign_buckets(std::span<const uint64_t>(args.param_bytes, args.num_params), bucket_bytes_);
  out.size = args.data_parallel;
  out.distributed_optimizer = distributed_optimizer_ ? 1 : 0;
  out.overlap = overlap_ ? 1 : 0;
  out.overlap_param_gather = overlap_param_gather_ ? 1 : 0;
  out.bucket_of = bucket_of_.data();
  out.num_buckets = bucket_of_.empty() ? 0 : bucket_of_.back() + 1;
}

MH_ComponentDesc megatron_component() {
  return component<MegatronDataParallel>(
      "megatron", "1.0.0",
      "Megatron data parallelism: gradient buckets in backward order, overlapped reduction, "
      "optional distributed optimizer",
      kOptions);
}

}  // namespace mh::data
