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
#include <functional>

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
  // A branch's output projection: writes its f32 partial sums [rows, h].
  using Projection = std::function<void(float* partial)>;
  // Its backward from the output's gradient [rows, h]: accumulates the
  // projection's gradients and returns its input's.
  using ProjectionBwd = std::function<Buffer(TypedPtr dy)>;

  // out [n, h] = residual + dropout(exit(projection) + bias); bias -1 when
  // the model has none. `region`: the projection ends a tensor-parallel
  // region (MlpPart::tensor_region); else it writes the rank's own [n, h]
  // rows whole and there is no exit.
  void residual_branch(LayerActivations& A, int64_t layer, const LayerPass& pass, DropoutSite site,
                       const Projection& project, bool region, int b, TypedPtr residual, Activation mask,
                       TypedPtr out) const;
  // Its backward from dres: accumulates the bias's and the projection's
  // gradients and returns the gradient of the projection's input.
  Buffer residual_branch_bwd(LayerActivations& A, const float* dres, const ProjectionBwd& project_bwd, bool region,
                             int b, Activation mask) const;
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
