#include "engine/decoder.hpp"

#include "engine/embedding.hpp"
#include "engine/layer.hpp"
#include "engine/ops.hpp"
#include "engine/output_head.hpp"
#include "engine/parts/cached_attention.hpp"
#include "engine/parts/layer_parts.hpp"
#include "engine/tensor_parallel.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// The tensor plan without sequence parallelism: nothing on entering a
// column-parallel block, an all-reduce on leaving a row-parallel one.
MH_TensorPlan without_sequence_parallel(MH_TensorPlan plan) {
  const bool split = plan.size > 1;
  plan.sequence_parallel = 0;
  plan.enter_fwd = MH_COLL_NONE;
  plan.exit_fwd = split ? MH_COLL_ALL_REDUCE : MH_COLL_NONE;
  return plan;
}

// The skeleton as one inference forward of `rows` packed rows runs it: the
// model's dimensions with those rows as its sequence, the parts the
// specification chooses, and the cached attention core.
struct Pass {
  ModelDims d;
  TensorParallel tp;
  PartContext ctx;
  LayerParts parts;
  static constexpr LayerPass kInference{0, 0, 0, 0, true};

  Pass(Device& dev, ParamSet& params, Collectives& group, const MH_TensorPlan& plan, ModelDims dims, int64_t rows)
      : d(with_rows(dims, rows)), tp(dev, group, plan, d), ctx{dev, params, tp, d}, parts(build_layer_parts(ctx)) {}
  Pass(const Pass&) = delete;

  static ModelDims with_rows(ModelDims d, int64_t rows) {
    d.seq = rows;
    d.micro_batch = 1;
    d.sp = false;
    return d;
  }
};

}  // namespace

Decoder::Decoder(Device& device, ParamSet& params, Collectives& tensor, const MH_TensorPlan& plan,
                 const ModelDims& dims, KvCache& cache)
    : dev_(device), params_(params), tensor_(tensor), plan_(without_sequence_parallel(plan)), dims_(dims),
      cache_(cache) {
  dims_.sp = false;
}

Buffer Decoder::upload(const std::vector<int32_t>& host) {
  Buffer b(dev_, kWork, int64_t(host.size()), MH_I32);
  dev_.to_device(b.data(), host.data(), host.size() * sizeof(int32_t));
  return b;
}

Buffer Decoder::embed(const DecodeInput& in) {
  Pass pass(dev_, params_, tensor_, plan_, dims_, in.rows());
  const Buffer ids = upload(in.ids), positions = params_.wpe() >= 0 ? upload(in.positions) : Buffer();
  Buffer mask;
  return Embedding(pass.ctx).forward(static_cast<int32_t*>(ids.data()), static_cast<int32_t*>(positions.data()),
                                     Pass::kInference, mask);
}

Buffer Decoder::layers(Buffer x, int64_t first, int64_t count, const DecodeInput& in) {
  Pass pass(dev_, params_, tensor_, plan_, dims_, in.rows());
  const CachedAttention attention(pass.ctx, *pass.parts.position, cache_, in.seqs);
  const DecoderLayer layer(pass.ctx, pass.parts, attention);
  for (int64_t l = first; l < first + count; ++l) {
    LayerActivations A;
    A[kActLayerInput] = std::move(x);
    layer.forward(A, l, Pass::kInference, &x);
  }
  return x;
}

std::vector<int64_t> last_rows(const DecodeInput& in) {
  std::vector<int64_t> rows;
  for (const SequenceRows& s : in.seqs) rows.push_back(s.row + s.count - 1);
  return rows;
}

std::vector<float> Decoder::logits(const Buffer& x, std::span<const int64_t> rows) {
  const int64_t n = int64_t(rows.size()), h = dims_.hidden, V = dims_.local_vocab(), t = plan_.size;
  Pass pass(dev_, params_, tensor_, plan_, dims_, n);
  Buffer last = pass.ctx.activation(kWork, n * h);
  for (int64_t i = 0; i < n; ++i) ops::copy(dev_, x.ptr() + rows[size_t(i)] * h, last.ptr() + i * h, h);
  const OutputHead head(pass.ctx, *pass.parts.norm);
  Buffer local = head.logits(head.norm(last.ptr()), Pass::kInference), all;
  if (t > 1) {
    all = Buffer(dev_, MemCategory::kComm, t * n * V);
    tensor_.all_gather(local.f32(), all.f32(), n * V);
  }
  std::vector<float> shards(size_t(t * n * V));
  dev_.to_host(shards.data(), (t > 1 ? all : local).data(), shards.size() * sizeof(float));
  // [t, n, V/t] shards to [n, vocab] rows.
  const int64_t vocab = dims_.real_vocab();
  std::vector<float> out(size_t(n * vocab));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t v = 0; v < V && r * V + v < vocab; ++v)
        out[size_t(i * vocab + r * V + v)] = shards[size_t((r * n + i) * V + v)];
  return out;
}

}  // namespace mh
