// The GPT model of one rank for one micro-batch: embeddings, the layers
// (attention + MLP, pre-LayerNorm), final layernorm and tied output with a
// vocabulary-parallel cross-entropy; backward mirrors forward in reverse.
//
// Recomputation is generic: forward keeps what the recompute policy said to
// keep (KeepTable); backward recomputes, in forward order, whatever a layer
// lacks, first rebuilding a missing layer input from the nearest kept one.
// Dropout masks come from the counter-based generator keyed by the
// micro-batch and the element's global position, so recomputed masks and
// every parallel layout see the same draws.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/activations.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/tensor_parallel.hpp"

namespace mh {

struct MicroBatch {
  Buffer ids;        // I32 [rows]: input tokens in [s, b] order
  Buffer targets;    // I32 [rows]: next tokens, same order
  Buffer positions;  // I32 [local_rows]: sequence position of each local row
  uint64_t key = 0;  // random stream of this micro-batch (seed, step, global index)
};

class Transformer {
 public:
  Transformer(Device& device, ParamSet& params, TensorParallel& tp, const ModelDims& dims, KeepTable keep);

  // Forward; returns the summed loss over the micro-batch's tokens. With
  // train = false dropout is off and nothing is kept.
  double forward(const MicroBatch& mb, bool train);
  // Backward of the micro-batch last forwarded with train = true; gradients
  // accumulate, each token's loss weighted by loss_scale.
  void backward(const MicroBatch& mb, float loss_scale);

 private:
  void embed(const MicroBatch& mb, float p);
  void embed_bwd(const MicroBatch& mb, const float* dres);
  void layer_forward(int64_t l, const MicroBatch& mb, float p, float attn_p, bool need_output);
  void layer_backward(int64_t l, float* dres);
  void attention_core(int64_t l, const MicroBatch& mb, float attn_p);
  void attention_bwd(int64_t l, const float* dctx, float* dqkv);
  void residual_branch(int64_t l, const MicroBatch& mb, int site, const float* branch_in, int64_t branch_width,
                       int w, int b, const float* residual, MH_Activation mask, float* out, float p);
  double head_forward(const MicroBatch& mb);
  void head_backward(const MicroBatch& mb, float loss_scale, float* dres);
  // Makes sure every activation layer l's backward reads is present.
  void recompute_for_backward(int64_t l, const MicroBatch& mb);
  void drop_unkept(int64_t l);

  MH_RngSpan hidden_span(const MicroBatch& mb, int64_t layer, int site) const;
  MH_RngSpan attention_span(const MicroBatch& mb, int64_t layer) const;
  float* P(int id) const { return params_.value(id); }
  float* G(int id) const { return params_.grad(id); }

  Device& dev_;
  ParamSet& params_;
  TensorParallel& tp_;
  ModelDims d_;
  KeepTable keep_;
  std::vector<LayerActivations> acts_;  // layers + 1
  Buffer emb_mask_, lnf_, logits_, xent_;
};

}  // namespace mh
