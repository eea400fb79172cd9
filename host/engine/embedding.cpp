#include "engine/embedding.hpp"

#include "engine/layer.hpp"
#include "engine/ops.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

}  // namespace

int64_t Embedding::positions_table() const { return c_.params.info(c_.params.wpe()).rows; }

// The lookups sum in f32 (the vocabulary shards are reduced in f32); the
// dropout writes the layer input in the compute dtype.
Buffer Embedding::forward(const int32_t* ids, const int32_t* positions, const LayerPass& pass, Buffer& mask) const {
  const int64_t n = c_.d.local_rows(), N = c_.d.rows(), h = c_.d.hidden;
  Buffer partial(c_.dev, kWork, N * h), scratch;
  ops::embedding(c_.dev, c_.P(c_.params.wte()), c_.d.local_vocab(), ids, partial.f32(), N, h, c_.d.vocab_start(),
                 false);
  TypedPtr e = c_.tp.exit_fwd(partial.f32(), scratch);
  if (c_.params.wpe() >= 0) ops::embedding(c_.dev, c_.P(c_.params.wpe()), positions_table(), positions, e, n, h, 0, true);
  Buffer x = c_.activation(kAct, n * h);
  mask = Buffer(c_.dev, pass.inference ? kWork : kAct, n * h, MH_U8);
  ops::dropout(c_.dev, e, {}, x.ptr(), static_cast<uint8_t*>(mask.data()), n * h, pass.dropout,
               hidden_dropout_span(c_.d, pass.key, -1, kDropoutSiteEmbedding));
  if (pass.inference) mask.release();
  return x;
}

void Embedding::backward(const int32_t* ids, const int32_t* positions, Buffer& mask, const float* dres) const {
  const int64_t n = c_.d.local_rows(), N = c_.d.rows(), h = c_.d.hidden;
  Buffer de(c_.dev, kWork, n * h), scratch;
  ops::dropout_bwd(c_.dev, dres, static_cast<uint8_t*>(mask.data()), de.f32(), n * h, c_.d.dropout);
  mask.release();
  if (c_.params.wpe() >= 0)
    ops::embedding_bwd(c_.dev, c_.G(c_.params.wpe()), positions_table(), positions, de.f32(), n, h, 0);
  TypedPtr df = c_.tp.exit_bwd(de.f32(), scratch);
  ops::embedding_bwd(c_.dev, c_.G(c_.params.wte()), c_.d.local_vocab(), ids, df, N, h, c_.d.vocab_start());
}

}  // namespace mh
