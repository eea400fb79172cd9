// The MLP part: FC1, the activation and the output projection (FC2) up to
// the tensor-parallel exit, one class per activation, chosen by the model's
// specification (layer_parts.hpp); the mixture of experts is another
// (moe_mlp.hpp). The exit, FC2's bias, dropout and the residual belong to
// the layer's residual branch.
#pragma once

#include <megahost/abi.h>

#include "engine/activations.hpp"
#include "engine/parts/lora.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class MlpPart {
 public:
  explicit MlpPart(const PartContext& c) : c_(c) {}
  virtual ~MlpPart() = default;

  // Fills whichever of FC1 and the activation's output A lacks, from A's
  // second norm output; the adapters read `drop`.
  virtual void forward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass,
                       const LoraDropout& drop) const = 0;
  // partial f32 [rows, h] = the output projection of the activation output,
  // before the tensor-parallel exit.
  virtual void output(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, float* partial) const;
  // dy [rows, h]: the output's gradient after the exit's backward.
  // Accumulates FC2's gradient and returns the activation output's gradient.
  virtual Buffer output_bwd(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dy) const;
  // dact [rows, f/t]: the activation output's gradient (overwritten).
  // Accumulates FC1's (and the gate's) gradients and writes the gradient of
  // the (gathered) norm output, f32 [rows, h], into `dx`.
  virtual void backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                        Buffer& dx) const = 0;

  // Whether the part is a tensor-parallel region: its input gathered (or
  // replicated) over the tensor group at the entry and its output partial
  // sums reduced at the exit, as a dense MLP split over the tensor group is.
  // A part that is not reads and writes the rank's own [local_rows, h] rows
  // and has no entry or exit; output's `partial` and backward's `dx` then
  // hold local_rows rows.
  virtual bool tensor_region() const { return true; }

  static double activation_bytes(const ModelDims& d, double e, Activation a);

 protected:
  // Column block [first, first + f/t) of FC1's [rows, local_fc1] buffer.
  MH_Tensor block(TypedPtr fc1, int64_t first) const;

  PartContext c_;
};

// FC1 [rows, f/t] = x @ W1^T + b1; act = gelu(FC1) (tanh approximation).
class GeluMlpPart final : public MlpPart {
 public:
  using MlpPart::MlpPart;
  void forward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass,
               const LoraDropout& drop) const override;
  void backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                Buffer& dx) const override;
};

// FC1 [rows, 2 f/t] holds the gate beside the up projection in each row
// (gate, then up); act = silu(gate) * up.
class SwigluMlpPart final : public MlpPart {
 public:
  using MlpPart::MlpPart;
  void forward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass,
               const LoraDropout& drop) const override;
  void backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                Buffer& dx) const override;

 private:
  // fc1's half = in @ W^T (+ bias, + the LoRA adapter's), for the gate or the up projection.
  void project(TypedPtr in, TypedPtr fc1, int64_t first, int weight, int bias, const LoraIds& lora,
               const LoraDropout& drop, LoraTarget target) const;
  void project_bwd(TypedPtr in, TypedPtr dfc1, int64_t first, int weight, int bias, const LoraIds& lora,
                   const LoraDropout& drop, LoraTarget target, float* dx, float beta) const;
  // [rows] ones in the compute dtype: the strided bias's rank-1 factor.
  Buffer ones() const;
};

}  // namespace mh
