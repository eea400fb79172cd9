// The decoder of one rank for one micro-batch in training and evaluation:
// the skeleton's embedding, layers and output head (embedding.hpp,
// layer.hpp, output_head.hpp) with the full attention core, and the
// vocabulary-parallel cross-entropy; backward mirrors forward in reverse.
//
// Recomputation is generic: forward keeps what the recompute policy said to
// keep (KeepTable); backward recomputes, in forward order, whatever a layer
// lacks, first rebuilding a missing layer input from the nearest kept one.
// Dropout masks come from the counter-based generator keyed by the
// micro-batch and the element's global position, so recomputed masks and
// every parallel layout see the same draws.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "engine/activations.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/embedding.hpp"
#include "engine/layer.hpp"
#include "engine/output_head.hpp"
#include "engine/parts/attention.hpp"
#include "engine/parts/layer_parts.hpp"
#include "engine/tensor_parallel.hpp"

namespace mh {

// What a model chunk's forward of one micro-batch keeps for its backward.
// acts[l] belongs to the chunk's l-th layer; acts[layers] holds the chunk's
// output (the next chunk's input, or the final layernorm's input).
struct ForwardState {
  std::vector<LayerActivations> acts;
  Buffer emb_mask, lnf, logits, xent;
};

// Layers [first_layer, first_layer + layers) of the model; the first chunk
// embeds the tokens, the last one holds the final layernorm, output and loss.
struct ChunkSpec {
  int64_t first_layer = 0, layers = 0;
  bool first = true, last = true;
};

struct MicroBatch {
  Buffer ids;        // I32 [rows]: input tokens in [s, b] order
  Buffer targets;    // I32 [rows]: next tokens, same order
  Buffer positions;  // I32 [local_rows]: position of each local row (in its document when packed)
  // Packed documents (LayerPass): I32 [b, s], empty when off.
  Buffer document_positions, document_starts;
  uint64_t key = 0;  // random stream of this micro-batch (seed, step, global index)
  // The loss counts samples [0, counted) only: a split's last micro-batch,
  // filled up past the split's end, counts its real samples alone.
  int64_t counted = INT64_MAX;
  // [rows], same order: 1 where the row's target counts in the loss (the
  // samples' loss mask); empty when every row counts.
  std::vector<uint8_t> loss_mask;
};

// Told the parameters whose gradients backward has just made its last
// contribution to (gradient buckets start their reduction from it).
using GradsFinalised = std::function<void(std::span<const int> param_ids)>;
// Told the parameters forward is about to read (an overlapped parameter
// gather waits for them).
using ParamsNeeded = std::function<void(std::span<const int> param_ids)>;

class Transformer {
 public:
  // keep: the recompute policy's decisions for the chunk's layers, in order.
  // context: the context-parallel group (NULL with cp = 1); experts and
  // sequence: the expert and sequence groups (PartContext).
  Transformer(Device& device, ParamSet& params, TensorParallel& tp, Collectives* context, const ModelDims& dims,
              ChunkSpec chunk, KeepTable keep, ParamsNeeded needed = {}, Collectives* experts = nullptr,
              Collectives* sequence = nullptr);

  const ChunkSpec& chunk() const { return chunk_; }
  // Forward of one micro-batch through the chunk. `input` is the received
  // activation [local_rows, h] (ignored by the first chunk). Returns the
  // summed loss over the micro-batch's tokens on the last chunk, else 0;
  // the output to send is output(st). With train = false dropout is off and
  // only the output is kept.
  double forward(ForwardState& st, const MicroBatch& mb, Buffer input, bool train);
  Buffer& output(ForwardState& st) const { return st.acts[size_t(chunk_.layers)][kActLayerInput]; }
  // Backward of a micro-batch forwarded with train = true: `dout` is the
  // received gradient of the output (ignored by the last chunk). Gradients
  // accumulate, each token's loss weighted by loss_scale. Returns the
  // gradient of the chunk's input (empty for the first chunk); st is spent.
  // `finalised`, when set, hears of each part (head, layer, embedding) as
  // soon as its gradients are done: set it on the step's last backward of
  // the chunk only.
  Buffer backward(ForwardState& st, const MicroBatch& mb, Buffer dout, float loss_scale,
                  const GradsFinalised& finalised = {});

  // Mixture of experts: the weight of a micro-batch's load-balancing loss
  // in the training objective (1 / micro-batches per step), and the sum of
  // the chunk's layers' losses over the forwards since the last take.
  void set_moe_aux_weight(float weight) { moe_aux_weight_ = weight; }
  double take_moe_aux() { return std::exchange(moe_aux_, 0.0); }

 private:
  void embed(ForwardState& st, const MicroBatch& mb, const LayerPass& pass);
  void layer_forward(ForwardState& st, int64_t l, const LayerPass& pass, bool need_output);
  double head_forward(ForwardState& st, const MicroBatch& mb);
  void head_backward(ForwardState& st, const MicroBatch& mb, float loss_scale, float* dres);
  // Makes sure every activation layer l's backward reads is present.
  void recompute_for_backward(ForwardState& st, int64_t l, const MicroBatch& mb);
  void drop_unkept(ForwardState& st, int64_t l);
  // Training's pass over micro-batch mb (what recomputation replays).
  LayerPass training_pass(const MicroBatch& mb) const;

  // Global layer index of the chunk's layer l (parameters, dropout streams).
  int64_t global(int64_t l) const { return chunk_.first_layer + l; }
  TypedPtr P(int id) const { return params_.weight(id); }
  float* G(int id) const { return params_.grad(id); }
  Buffer activation(MemCategory category, int64_t elements) const { return ctx_.activation(category, elements); }

  Device& dev_;
  ParamSet& params_;
  TensorParallel& tp_;
  ModelDims d_;
  ChunkSpec chunk_;
  KeepTable keep_;
  ParamsNeeded needed_;
  float moe_aux_weight_ = 0;
  double moe_aux_ = 0;
  PartContext ctx_;
  LayerParts parts_;
  std::unique_ptr<AttentionPart> attention_;
  DecoderLayer layer_;
  Embedding embedding_;
  OutputHead head_;
};

}  // namespace mh
