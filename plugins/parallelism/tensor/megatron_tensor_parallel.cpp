#include "megatron_tensor_parallel.hpp"

#include <megahost/struct_size.hpp>

#include "plan_checks.hpp"

#include <string>
#include <string_view>

namespace mh::tensor {

namespace {

// Column-parallel weights (QKV, the gate, FC1) are split along their output
// rows, row-parallel ones (the projection, FC2) along their input columns,
// so that one attention or MLP block needs a single collective on entry and
// one on exit. The embedding [V, H] is split along the vocabulary.
struct WeightShard {
  std::string_view name;
  MH_ShardDim dim;
};
constexpr WeightShard kWeightShards[] = {
    {"embedding", MH_SHARD_ROWS}, {"attention.qkv", MH_SHARD_ROWS}, {"attention.proj", MH_SHARD_COLS},
    {"mlp.gate", MH_SHARD_ROWS},  {"mlp.fc1", MH_SHARD_ROWS},       {"mlp.fc2", MH_SHARD_COLS},
};

// The split of weight `name`, or nullptr for a name this plan does not know.
const WeightShard* find_weight(std::string_view name) {
  for (const WeightShard& w : kWeightShards)
    if (w.name == name) return &w;
  return nullptr;
}

// A weight sharded wrongly computes another function, so a name this plan
// does not know is refused rather than replicated.
void check_weights(const MH_TensorPlanArgs& args, plan::Problems& problems) {
  for (size_t i = 0; i < args.num_weights; ++i)
    if (find_weight(args.weights[i]) == nullptr)
      problems.add("unknown weight '" + std::string(args.weights[i]) +
                   "': this tensor-parallel plan shards embedding, attention.qkv, attention.proj, mlp.gate, "
                   "mlp.fc1 and mlp.fc2; use a plan that knows the model's weights");
}

void fill_shards(bool sharded, const MH_TensorPlanArgs& args, MH_TensorPlan& out) {
  for (size_t i = 0; i < args.num_weights; ++i)
    out.shard[i] = sharded ? find_weight(args.weights[i])->dim : MH_SHARD_NONE;
}

// Megatron's conjugate operators at the region boundaries: f (identity
// forward, all-reduce backward) on entry and g (all-reduce forward, identity
// backward) on exit; with sequence parallelism the all-reduces split into an
// all-gather and a reduce-scatter along the sequence.
void fill_collectives(int32_t size, bool sequence_parallel, MH_TensorPlan& out) {
  out.enter_fwd = out.enter_bwd = out.exit_fwd = out.exit_bwd = MH_COLL_NONE;
  if (size == 1) return;
  if (sequence_parallel) {
    out.enter_fwd = MH_COLL_ALL_GATHER;
    out.enter_bwd = MH_COLL_REDUCE_SCATTER;
    out.exit_fwd = MH_COLL_REDUCE_SCATTER;
    out.exit_bwd = MH_COLL_ALL_GATHER;
  } else {
    out.enter_bwd = MH_COLL_ALL_REDUCE;
    out.exit_fwd = MH_COLL_ALL_REDUCE;
  }
}

}  // namespace

MegatronTensorParallel::MegatronTensorParallel(const CreateContext& ctx)
    : size_key_(ctx.options.key("size")),
      sequence_parallel_key_(ctx.options.key("sequence_parallel")),
      size_(static_cast<int32_t>(ctx.options.get_int("size"))),
      // Like Megatron, sequence parallelism is switched off without tensor
      // parallelism: there is nothing to shard the sequence across.
      sequence_parallel_(size_ > 1 && ctx.options.get_bool("sequence_parallel")) {}

void MegatronTensorParallel::check_divisibility(const MH_ModelShape& shape, plan::Problems& problems) const {
  auto require_divides = [&](int64_t n, const std::string& what, const std::string& alternative) {
    if (n % size_ == 0) return;
    problems.add(plan::does_not_divide(size_key_, size_, what, n, kMaxSize) + alternative);
  };
  require_divides(shape.heads, "model.heads", "");
  // With kv_heads = heads the check of the heads says it all.
  if (reaches(shape, &MH_ModelShape::untied_output) && shape.kv_heads > 0 &&
      shape.kv_heads != shape.heads)
    require_divides(shape.kv_heads, "model.kv_heads",
                    " (each rank holds whole key/value groups: with grouped-query attention the tensor-parallel "
                    "size must divide kv_heads)");
  require_divides(shape.hidden, "model.hidden", "");
  require_divides(shape.ffn_hidden, "model.ffn_hidden", "");
  int64_t padded_vocab = (shape.vocab + size_ - 1) / size_ * size_;
  require_divides(shape.vocab, "model.vocab",
                  ", or pad model.vocab to " + std::to_string(padded_vocab) +
                      " (the vocabulary is not padded for you)");
  if (sequence_parallel_)
    require_divides(shape.seq_len, "model.seq_len",
                    ", or set " + sequence_parallel_key_ + " = false");
  require_divides(shape.world_size, "the world size", "");
}

void MegatronTensorParallel::plan(const MH_TensorPlanArgs& args, MH_TensorPlan& out) const {
  require(args.num_weights == 0 || (args.weights != nullptr && out.shard != nullptr),
          "the plan's arguments list " + std::to_string(args.num_weights) +
              " weights without their names or the host's shard array "
              "(MH_TensorPlanArgs.weights, MH_TensorPlan.shard is NULL)");
  plan::Problems problems;
  check_weights(args, problems);
  check_divisibility(plan::shape_of(args, "MH_TensorPlanArgs"), problems);
  problems.raise();
  out.size = size_;
  out.sequence_parallel = sequence_parallel_ ? 1 : 0;
  fill_shards(size_ > 1, args, out);
  fill_collectives(size_, sequence_parallel_, out);
  // With sequence shards each rank sees only S/t rows, so the layernorm
  // weight and bias gradients are partial sums over the group.
  out.reduce_norm_grads = sequence_parallel_ ? 1 : 0;
}

MH_ComponentDesc megatron_component() {
  return component<MegatronTensorParallel>(
      "megatron", "1.0.0",
      "Megatron tensor parallelism: column/row-parallel attention and MLP, vocabulary-parallel "
      "embedding, optional sequence parallelism",
      kOptions);
}

}  // namespace mh::tensor
