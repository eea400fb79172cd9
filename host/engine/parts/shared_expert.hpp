// Shared experts (docs/models.md; Qwen2-MoE, DeepSeek-MoE): a SwiGLU MLP
// every row passes through beside the k experts it is routed to, its output
// added to theirs. n shared experts of width F are one MLP of width n F
// (their outputs add up), so the part computes that one. Under
// shared_expert_gate (Qwen2-MoE) its output is scaled row by row by
// sigmoid(x g), g [1, h] a learned vector:
//   out = routed(x) + sigmoid(x g) shared(x).
// The specification chooses it (layer_parts.cpp) and the mixture of experts
// combines it at its output; its FC1 [rows, 2 Fs] and activation output
// [rows, Fs] are the tails of the mixture's FC1 and activation buffers, so
// the recompute policy keeps or recomputes them with the experts'.
#pragma once

#include "engine/activations.hpp"
#include "engine/parts/part_context.hpp"

namespace mh {

class SharedExpertPart {
 public:
  explicit SharedExpertPart(const PartContext& c);

  int64_t width() const { return c_.d.shared_width(); }
  // fc1 [rows, 2 Fs] from the norm output `in` [rows, h].
  void fc1(TypedPtr in, TypedPtr fc1, const LayerParamIds& w) const;
  // r's shared gate from `in`, under shared_expert_gate; computed once per
  // micro-batch with the routing and kept with it, as inference releases
  // the norm output before the output projection.
  void gate(TypedPtr in, const LayerParamIds& w, const LayerPass& pass, MoeRouting& r) const;
  // partial f32 [rows, h] += gate * (act [rows, Fs] @ W2^T).
  void output(const MoeRouting& r, TypedPtr act, const LayerParamIds& w, float* partial) const;
  // From the output's gradient dy [rows, h]: dact [rows, Fs] and, under the
  // gate, the gate's logit gradient dz [rows]; W2's gradient accumulates.
  void output_bwd(const MoeRouting& r, TypedPtr act, const LayerParamIds& w, TypedPtr dy, TypedPtr dact,
                  TypedPtr dz) const;
  // dx f32 [rows, h] gains the gradient through FC1 (from dfc1 [rows, 2 Fs])
  // and the gate (from dz); the gate and up projections' and g's gradients
  // accumulate.
  void backward(TypedPtr in, TypedPtr dfc1, TypedPtr dz, const LayerParamIds& w, float* dx) const;
  // Elements output_bwd's dz takes: rows under the gate, else none.
  int64_t gate_grad_elements() const;

 private:
  // Column block `first` of FC1's [rows, 2 Fs].
  MH_Tensor half(TypedPtr fc1, int64_t first) const;

  PartContext c_;
};

}  // namespace mh
