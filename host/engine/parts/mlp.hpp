// The MLP part up to its output projection: FC1 and the activation, GeLU
// or SwiGLU. Under SwiGLU, FC1's activation holds the gate beside the up
// projection in each row ([rows, 2 f/t]: gate, then up) and the activation
// slot holds silu(gate) * up. FC2 belongs to the layer's residual branch.
#pragma once

#include <megahost/abi.h>

#include "engine/activations.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class MlpPart {
 public:
  explicit MlpPart(const PartContext& c) : c_(c) {}

  // Fills whichever of FC1 and the activation's output A lacks, from A's
  // second norm output.
  void forward(LayerActivations& A, const LayerParamIds& w) const;
  // dact [rows, f/t]: the activation output's gradient (overwritten).
  // Accumulates FC1's (and the gate's) gradients and writes the gradient of
  // the (gathered) norm output, f32 [rows, h], into `dx`.
  void backward(LayerActivations& A, const LayerParamIds& w, Buffer& dact, Buffer& dx) const;

  static double activation_bytes(const ModelDims& d, double e, MH_Activation a);

 private:
  bool swiglu() const { return c_.d.spec.activation == MlpActivation::kSwiglu; }
  // Column block [first, first + f/t) of FC1's [rows, local_fc1] buffer.
  MH_Tensor half(TypedPtr fc1, int64_t first) const;
  // fc1's half = in @ W^T (+ bias), for the gate or the up projection.
  void project(TypedPtr in, TypedPtr fc1, int64_t first, int weight, int bias) const;
  // [rows] ones in the compute dtype: the strided bias's rank-1 factor.
  Buffer ones() const;
  void project_bwd(TypedPtr in, TypedPtr dfc1, int64_t first, int weight, int bias, float* dx, float beta) const;

  PartContext c_;
};

}  // namespace mh
