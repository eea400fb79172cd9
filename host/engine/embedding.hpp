// The embedding, written once for training, evaluation and generation:
// each row's token embedding (vocabulary-parallel: each rank looks up the
// ids of its shard and the tensor group sums), plus its position embedding
// when positions are learned, then the embedding dropout.
#pragma once

#include <cstdint>

#include "engine/parts/part_context.hpp"

namespace mh {

class Embedding {
 public:
  explicit Embedding(const PartContext& c) : c_(c) {}

  // x [local_rows, h] from device ids [rows] and positions [local_rows]
  // (NULL without learned positions). `mask` receives the dropout mask,
  // which inference does not keep.
  Buffer forward(const int32_t* ids, const int32_t* positions, const LayerPass& pass, Buffer& mask) const;
  // dres [local_rows, h]: the gradient of x; the embeddings' gradients
  // accumulate and the mask is spent.
  void backward(const int32_t* ids, const int32_t* positions, Buffer& mask, const float* dres) const;

 private:
  // Rows of the position embedding: the model's sequence length (a
  // generation pass's rows are not positions).
  int64_t positions_table() const;

  PartContext c_;
};

}  // namespace mh
