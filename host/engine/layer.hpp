// The transformer layer, written once for training, evaluation and
// generation (pre-norm):
//
//   x   -> norm -> attention core -> projection -> TP exit -> bias -> dropout + x   = mid
//   mid -> norm -> MLP            -> FC2        -> TP exit -> bias -> dropout + mid = out
//
// The parts come from the model's specification (parts/layer_parts.hpp);
// the attention core is the caller's: full for training and evaluation,
// cached for generation. The pass (parts/part_context.hpp) sets dropout and
// whether anything is kept for a backward. Forward fills only what the
// layer's activations lack, so backward's recomputation is the same call.
#pragma once

#include <cstdint>

#include "engine/activations.hpp"
#include "engine/parts/attention.hpp"
#include "engine/parts/layer_parts.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class DecoderLayer {
 public:
  DecoderLayer(const PartContext& c, const LayerParts& parts, const AttentionCore& attention)
      : c_(c), parts_(parts), attention_(attention) {}

  // Fills whichever of global layer `layer`'s activations A lacks, from
  // A[LAYER_INPUT] [local_rows, h], and writes the layer's output into
  // `*next` when `next` is set and empty. Without an output to write, the
  // last branch runs only to regenerate a missing dropout mask.
  void forward(LayerActivations& A, int64_t layer, const LayerPass& pass, Buffer* next) const;
  // dres [local_rows, h]: the gradient of the layer's output, replaced by
  // that of its input; the parameters' gradients accumulate. `pass` is the
  // one forward ran.
  void backward(LayerActivations& A, int64_t layer, const LayerPass& pass, float* dres) const;

 private:
  // out [n, h] = residual + dropout(exit(branch_in @ W^T) + bias): a branch's
  // output projection (with its LoRA adapter); bias -1 when the model has none.
  void residual_branch(LayerActivations& A, int64_t layer, const LayerPass& pass, DropoutSite site,
                       TypedPtr branch_in, int64_t branch_width, int w, int b, const LoraIds& lora,
                       LoraTarget target, TypedPtr residual, MH_Activation mask, TypedPtr out) const;
  // Its backward from dres: accumulates W's and the bias's gradients and
  // returns the gradient of branch_in [rows, branch_width].
  Buffer residual_branch_bwd(LayerActivations& A, const float* dres, TypedPtr branch_in,
                             int64_t branch_width, int w, int b, const LoraIds& lora, const LoraDropout& drop,
                             LoraTarget target, MH_Activation mask) const;
  // The hidden dropout's stream at `site`: the local rows are one
  // contiguous block of the [s, b, h] tensor.
  MH_RngSpan hidden_span(const LayerPass& pass, int64_t layer, DropoutSite site) const;

  PartContext c_;
  const LayerParts& parts_;
  const AttentionCore& attention_;
};

// The embedding's dropout stream, shared with DecoderLayer's layout.
MH_RngSpan hidden_dropout_span(const ModelDims& d, uint64_t key, int64_t layer, DropoutSite site);

}  // namespace mh
