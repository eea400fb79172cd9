// The decoder of one rank for one micro-batch: embeddings, the layers, the
// final norm and the output layer with a vocabulary-parallel cross-entropy;
// backward mirrors forward in reverse. A layer is assembled from the parts
// the model's specification names (engine/parts/): norm, attention with its
// position encoding, norm, MLP with its activation, each branch closed by
// its output projection, dropout and the residual add (pre-norm).
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
#include <vector>

#include "engine/activations.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/parts/attention.hpp"
#include "engine/parts/mlp.hpp"
#include "engine/parts/norm.hpp"
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
  Buffer positions;  // I32 [local_rows]: sequence position of each local row
  uint64_t key = 0;  // random stream of this micro-batch (seed, step, global index)
  // The loss counts samples [0, counted) only: a split's last micro-batch,
  // filled up past the split's end, counts its real samples alone.
  int64_t counted = INT64_MAX;
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
  Transformer(Device& device, ParamSet& params, TensorParallel& tp, const ModelDims& dims, ChunkSpec chunk,
              KeepTable keep, ParamsNeeded needed = {});

  const ChunkSpec& chunk() const { return chunk_; }
  // Forward of one micro-batch through the chunk. `input` is the received
  // activation [local_rows, h] (ignored by the first chunk). Returns the
  // summed loss over the micro-batch's tokens on the last chunk, else 0;
  // the output to send is output(st). With train = false dropout is off and
  // only the output is kept.
  double forward(ForwardState& st, const MicroBatch& mb, Buffer input, bool train);
  Buffer& output(ForwardState& st) const { return st.acts[size_t(chunk_.layers)][MH_ACT_LAYER_INPUT]; }
  // Backward of a micro-batch forwarded with train = true: `dout` is the
  // received gradient of the output (ignored by the last chunk). Gradients
  // accumulate, each token's loss weighted by loss_scale. Returns the
  // gradient of the chunk's input (empty for the first chunk); st is spent.
  // `finalised`, when set, hears of each part (head, layer, embedding) as
  // soon as its gradients are done: set it on the step's last backward of
  // the chunk only.
  Buffer backward(ForwardState& st, const MicroBatch& mb, Buffer dout, float loss_scale,
                  const GradsFinalised& finalised = {});

 private:
  void embed(ForwardState& st, const MicroBatch& mb, float p);
  void embed_bwd(ForwardState& st, const MicroBatch& mb, const float* dres);
  void layer_forward(ForwardState& st, int64_t l, const MicroBatch& mb, float p, float attn_p, bool need_output);
  void layer_backward(ForwardState& st, int64_t l, float* dres);
  // out [n, h] = residual + dropout(exit(branch_in @ W^T) + bias): a branch's
  // output projection; bias -1 when the model has none.
  void residual_branch(ForwardState& st, int64_t l, const MicroBatch& mb, int site, TypedPtr branch_in,
                       int64_t branch_width, int w, int b, TypedPtr residual, MH_Activation mask, TypedPtr out,
                       float p);
  // Its backward from dres: accumulates W's and the bias's gradients and
  // returns the gradient of branch_in [rows, branch_width].
  Buffer residual_branch_bwd(ForwardState& st, int64_t l, const float* dres, TypedPtr branch_in,
                             int64_t branch_width, int w, int b, MH_Activation mask);
  double head_forward(ForwardState& st, const MicroBatch& mb);
  void head_backward(ForwardState& st, const MicroBatch& mb, float loss_scale, float* dres);
  // Makes sure every activation layer l's backward reads is present.
  void recompute_for_backward(ForwardState& st, int64_t l, const MicroBatch& mb);
  void drop_unkept(ForwardState& st, int64_t l);

  // Global layer index of the chunk's layer l (parameters, dropout streams).
  int64_t global(int64_t l) const { return chunk_.first_layer + l; }
  MH_RngSpan hidden_span(const MicroBatch& mb, int64_t layer, int site) const;
  MH_RngSpan attention_span(const MicroBatch& mb, int64_t layer) const;
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
  PartContext ctx_;
  NormPart norm_;
  AttentionPart attention_;
  MlpPart mlp_;
};

}  // namespace mh
