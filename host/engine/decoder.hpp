// One rank's model run for generation: the training skeleton's embedding,
// layers and output head (embedding.hpp, layer.hpp, output_head.hpp) run
// forward only, as an inference pass, over the packed rows of the sequences
// served, with the cached attention core: each sequence reads and extends
// its KV cache slot. Dropout is off and so is sequence parallelism: a
// decode step has one row per sequence, which does not split over the
// tensor group, so the tensor-parallel regions are entered and left as
// Megatron does without it (an all-reduce after attention and after the MLP).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/kv_cache.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"

namespace mh {

// One forward's input: token ids and positions of every packed row, and
// which rows belong to which sequence.
struct DecodeInput {
  std::vector<int32_t> ids, positions;
  std::vector<SequenceRows> seqs;
  int64_t rows() const { return int64_t(ids.size()); }
};
// Each sequence's last row: the one that predicts its next token.
std::vector<int64_t> last_rows(const DecodeInput& in);

class Decoder {
 public:
  // dims: the rank's (tp_rank set); plan: the tensor plugin's, whose
  // sequence parallelism generation does not use.
  Decoder(Device& device, ParamSet& params, Collectives& tensor, const MH_TensorPlan& plan, const ModelDims& dims,
          KvCache& cache);

  // The first chunk's input: the rows' token (and position) embeddings, [rows, h].
  Buffer embed(const DecodeInput& in);
  // Global layers [first, first + count) over x [rows, h]; returns their output.
  Buffer layers(Buffer x, int64_t first, int64_t count, const DecodeInput& in);
  // The output layer on the given rows of x: f32 logits [rows, vocab] of
  // the tokenizer's vocabulary (padding dropped), on the host, the same on
  // every rank of the tensor group.
  std::vector<float> logits(const Buffer& x, std::span<const int64_t> rows);

 private:
  Buffer upload(const std::vector<int32_t>& host);

  Device& dev_;
  ParamSet& params_;
  Collectives& tensor_;
  MH_TensorPlan plan_;
  ModelDims dims_;
  KvCache& cache_;
};

}  // namespace mh
