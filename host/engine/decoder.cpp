#include "engine/decoder.hpp"

#include "engine/ops.hpp"
#include "engine/parts/cached_attention.hpp"
#include "engine/parts/mlp.hpp"
#include "engine/parts/norm.hpp"
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

// What the parts work with for one forward of `rows` packed rows: the
// model's dimensions with those rows as its sequence.
struct Pass {
  ModelDims d;
  TensorParallel tp;
  PartContext ctx;

  Pass(Device& dev, ParamSet& params, Collectives& group, const MH_TensorPlan& plan, ModelDims dims, int64_t rows)
      : d(with_rows(dims, rows)), tp(dev, group, plan, d), ctx{dev, params, tp, d} {}
  Pass(const Pass&) = delete;

  static ModelDims with_rows(ModelDims d, int64_t rows) {
    d.seq = rows;
    d.micro_batch = 1;
    d.sp = false;
    return d;
  }

  // out = residual + (branch_in @ W^T + bias), summed over the tensor group.
  Buffer branch(TypedPtr branch_in, int64_t width, int w, int b, TypedPtr residual) {
    const int64_t n = d.rows(), h = d.hidden;
    Buffer partial(ctx.dev, kWork, n * h), scratch, mask(ctx.dev, kWork, n * h, MH_U8);
    ops::linear(ctx.dev, branch_in, ctx.P(w), partial.f32(), n, width, h);
    TypedPtr y = tp.exit_fwd(partial.f32(), scratch);
    if (b >= 0) ops::bias_add(ctx.dev, y, ctx.P(b), n, h);
    Buffer out = ctx.activation(kAct, n * h);
    ops::dropout(ctx.dev, y, residual, out.ptr(), static_cast<uint8_t*>(mask.data()), n * h, 0,
                 MH_RngSpan{0, 0, uint64_t(n * h), uint64_t(n * h)});
    return out;
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
  const int64_t n = in.rows(), h = dims_.hidden;
  const Buffer ids = upload(in.ids);
  Buffer partial(dev_, kWork, n * h), scratch;
  ops::embedding(dev_, params_.weight(params_.wte()), dims_.local_vocab(), static_cast<int32_t*>(ids.data()),
                 partial.f32(), n, h, dims_.vocab_start(), false);
  TypedPtr e = pass.tp.exit_fwd(partial.f32(), scratch);
  if (params_.wpe() >= 0) {
    const Buffer positions = upload(in.positions);
    ops::embedding(dev_, params_.weight(params_.wpe()), dims_.seq, static_cast<int32_t*>(positions.data()), e, n, h,
                   0, true);
  }
  Buffer x = pass.ctx.activation(kAct, n * h);
  ops::copy(dev_, e, x.ptr(), n * h);
  return x;
}

Buffer Decoder::layers(Buffer x, int64_t first, int64_t count, const DecodeInput& in) {
  for (int64_t l = first; l < first + count; ++l) x = layer(std::move(x), l, in);
  return x;
}

Buffer Decoder::layer(Buffer x, int64_t l, const DecodeInput& in) {
  Pass pass(dev_, params_, tensor_, plan_, dims_, in.rows());
  const LayerParamIds& w = params_.layer(l);
  const NormPart norm(pass.ctx);
  LayerActivations A;
  A[MH_ACT_LN1] = norm.forward(x.ptr(), w.ln1_w, w.ln1_b);
  CachedAttention(pass.ctx).forward(A, w, l, cache_, in.seqs);
  A[MH_ACT_LN1].release();
  A[MH_ACT_QKV].release();
  Buffer mid = pass.branch(A[MH_ACT_CONTEXT].ptr(), dims_.local_hidden(), w.proj_w, w.proj_b, x.ptr());
  A[MH_ACT_CONTEXT].release();
  x.release();
  A[MH_ACT_LN2] = norm.forward(mid.ptr(), w.ln2_w, w.ln2_b);
  MlpPart(pass.ctx).forward(A, w);
  A[MH_ACT_LN2].release();
  A[MH_ACT_FC1].release();
  return pass.branch(A[MH_ACT_GELU].ptr(), dims_.local_ffn(), w.fc2_w, w.fc2_b, mid.ptr());
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
  const Buffer normed = NormPart(pass.ctx).forward(last.ptr(), params_.lnf_w(), params_.lnf_b());
  // f32 logits, as training's: sampling compares and exponentiates them.
  Buffer local(dev_, kWork, n * V), all;
  ops::linear(dev_, normed.ptr(), params_.weight(params_.head_w()), local.f32(), n, h, V);
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
