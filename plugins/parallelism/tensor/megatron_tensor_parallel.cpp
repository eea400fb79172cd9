#include "megatron_tensor_parallel.hpp"

#include <megahost/struct_size.hpp>

#include "plan_checks.hpp"

#include <string>

namespace mh::tensor {

namespace {

// Column-parallel weights (QKV, FC1) are split along their output rows,
// row-parallel ones (PROJ, FC2) along their input columns, so that one
// attention or MLP block needs a single collective on entry and one on exit.
// The tied embedding [V, H] is split along the vocabulary.
void fill_shards(bool sharded, MH_TensorPlan& out) {
  auto shard = [&](MH_ShardDim dim) { return sharded ? dim : MH_SHARD_NONE; };
  out.shard[MH_W_EMBEDDING] = shard(MH_SHARD_ROWS);
  out.shard[MH_W_QKV] = shard(MH_SHARD_ROWS);
  out.shard[MH_W_PROJ] = shard(MH_SHARD_COLS);
  out.shard[MH_W_FC1] = shard(MH_SHARD_ROWS);
  out.shard[MH_W_FC2] = shard(MH_SHARD_COLS);
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

void MegatronTensorParallel::check_divisibility(const MH_ModelShape& shape) const {
  plan::Problems problems;
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
  problems.raise();
}

void MegatronTensorParallel::plan(const MH_ModelShape& shape, MH_TensorPlan& out) const {
  check_divisibility(shape);
  out.size = size_;
  out.sequence_parallel = sequence_parallel_ ? 1 : 0;
  fill_shards(size_ > 1, out);
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
