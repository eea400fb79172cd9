// Dimensions of the model as one rank sees them. One-letter names follow
// the paper: s sequence, b micro-batch, h hidden, a heads, f MLP inner size,
// V vocabulary, t tensor-parallel size. The residual stream is laid out
// [s, b, h] (sequence first), so a sequence shard is a contiguous block of
// rows; "rows" below means s*b.
#pragma once

#include <cstdint>

namespace mh {

struct ModelDims {
  int64_t layers, hidden, heads, ffn, seq, vocab, micro_batch;
  int32_t tp = 1, tp_rank = 0;
  bool sp = false;
  float dropout = 0, attention_dropout = 0, init_std = 0.02f, layernorm_eps = 1e-5f;

  int64_t head_dim() const { return hidden / heads; }
  int64_t local_heads() const { return heads / tp; }
  int64_t local_hidden() const { return hidden / tp; }   // attention width on this rank
  int64_t local_ffn() const { return ffn / tp; }
  int64_t local_vocab() const { return vocab / tp; }
  int64_t vocab_start() const { return tp_rank * local_vocab(); }
  int64_t rows() const { return seq * micro_batch; }
  // Rows of the layernorm and dropout regions: a sequence shard with SP.
  int64_t local_rows() const { return sp ? rows() / tp : rows(); }
  int64_t first_local_row() const { return sp ? tp_rank * local_rows() : 0; }
};

}  // namespace mh
