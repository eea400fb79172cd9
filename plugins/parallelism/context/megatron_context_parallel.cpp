#include "megatron_context_parallel.hpp"

#include "plan_checks.hpp"

#include <string>

namespace mh::context {
namespace {

int32_t comm_of(const std::string& name) {
  return name == "a2a" ? MH_CP_A2A : name == "p2p" ? MH_CP_P2P : MH_CP_ALL_GATHER;
}

}  // namespace

MegatronContextParallel::MegatronContextParallel(const CreateContext& ctx)
    : size_key_(ctx.options.key("size")),
      comm_key_(ctx.options.key("comm_type")),
      size_(static_cast<int32_t>(ctx.options.get_int("size"))),
      comm_(comm_of(ctx.options.get_string("comm_type"))),
      // One rank holds the whole sequence: there is nothing to balance.
      load_balance_(size_ > 1 && ctx.options.get_bool("load_balance")) {}

void MegatronContextParallel::plan(const MH_ContextPlanArgs& args, MH_ContextPlan& out) const {
  const MH_ModelShape& shape = plan::shape_of(args, "MH_ContextPlanArgs");
  plan::Problems problems;
  const int64_t chunks = load_balance_ ? 2 * int64_t(size_) : int64_t(size_);
  if (shape.seq_len % chunks != 0)
    problems.add(size_key_ + " = " + std::to_string(size_) + " cuts model.seq_len = " + std::to_string(shape.seq_len) +
                 " into " + std::to_string(chunks) + " chunks" + (load_balance_ ? " (2 per rank, load-balanced)" : "") +
                 ", which does not divide it; use a seq_len that is a multiple of " + std::to_string(chunks) +
                 ", or a size whose " + (load_balance_ ? "2 x size" : "size") + " divides " +
                 std::to_string(shape.seq_len));
  if (shape.world_size % size_ != 0)
    problems.add(plan::does_not_divide(size_key_, size_, "the world size", shape.world_size, kMaxSize));
  // Ulysses gives each rank whole sequences of 1/cp of the key/value
  // groups (each with its query heads); the tensor split comes on top and
  // the host checks the groups per tensor rank.
  const int64_t kv_heads =
      reaches(shape, &MH_ModelShape::untied_output) && shape.kv_heads > 0 ? shape.kv_heads : shape.heads;
  if (comm_ == MH_CP_A2A && kv_heads % size_ != 0)
    problems.add(comm_key_ + " = \"a2a\" splits the key/value heads over " + size_key_ + " = " +
                 std::to_string(size_) + ", which does not divide model.kv_heads = " + std::to_string(kv_heads) +
                 "; use comm_type = \"all_gather\", or a size that divides " + std::to_string(kv_heads) + " (" +
                 plan::divisors(kv_heads, kMaxSize) + ")");
  problems.raise();
  out.size = size_;
  out.comm = comm_;
  out.load_balance = load_balance_ ? 1 : 0;
}

MH_ComponentDesc megatron_component() {
  return component<MegatronContextParallel>(
      "megatron", "1.0.0",
      "Megatron context parallelism: the sequence split over the context group with causal load balancing, "
      "keys and values exchanged by attention (all-gather, ring or Ulysses all-to-all)",
      kOptions);
}

}  // namespace mh::context
