#include "engine/parts/mlp.hpp"

#include "engine/ops.hpp"
#include "engine/parts/lora.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

}  // namespace

// Under a mixture of experts each of the rank's own rows (its sequence
// shard under sequence parallelism) reaches k experts of width moe_ffn and
// the shared experts: the activations are those of a SwiGLU MLP of width
// k moe_ffn + Fs (a capacity drops slots, not their buffers).
double MlpPart::activation_bytes(const ModelDims& d, double e, Activation a) {
  const double width = d.moe() ? double(d.active_ffn()) : double(d.ffn) / double(d.tp);
  const double sbf_t = double(d.moe() ? d.local_rows() : d.rows()) * width;
  const double fc1_width = d.spec.activation == MlpActivation::kSwiglu ? 2 : 1;
  switch (a) {
    case kActFc1: return fc1_width * e * sbf_t;
    case kActGelu: return e * sbf_t;
    default: return 0;
  }
}

MH_Tensor MlpPart::block(TypedPtr fc1, int64_t first) const {
  return view((fc1 + first).data, fc1.dtype, {1, c_.d.rows(), c_.d.local_ffn()}, {0, c_.d.local_fc1(), 1});
}

void MlpPart::output(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, float* partial) const {
  adapted_projection(c_, A[kActGelu].ptr(), w.fc2_w, w.fc2_lora, drop, kLoraFc2, partial, c_.d.local_ffn(),
                     c_.d.hidden);
}

Buffer MlpPart::output_bwd(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dy) const {
  return adapted_projection_bwd(c_, A[kActGelu].ptr(), w.fc2_w, w.fc2_lora, drop, kLoraFc2, dy, c_.d.local_ffn(),
                                c_.d.hidden);
}

// ---- GeLU -----------------------------------------------------------------

void GeluMlpPart::forward(LayerActivations& A, const LayerParamIds& w, const LayerPass&,
                          const LoraDropout& drop) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, f = c_.d.local_ffn();
  if (!A.has(kActFc1)) {
    Buffer gathered;
    TypedPtr in = c_.tp.enter_fwd(A[kActLn2].ptr(), gathered);
    A[kActFc1] = c_.activation(kAct, N * f);
    ops::gemm(c_.dev, in.t({1, N, h}), c_.P(w.fc1_w).t({1, f, h}), block(A[kActFc1].ptr(), 0), false, true, 0);
    if (w.fc1_b >= 0) ops::bias_add(c_.dev, A[kActFc1].ptr(), c_.P(w.fc1_b), N, f);
    lora_forward(c_, w.fc1_lora, drop, kLoraFc1, in, block(A[kActFc1].ptr(), 0), h, f);
  }
  if (A.has(kActGelu)) return;
  A[kActGelu] = c_.activation(kAct, N * f);
  ops::gelu(c_.dev, A[kActFc1].ptr(), A[kActGelu].ptr(), N * f);
}

void GeluMlpPart::backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                           Buffer& dx) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, f = c_.d.local_ffn();
  Buffer gathered;
  TypedPtr in = c_.tp.enter_fwd(A[kActLn2].ptr(), gathered);
  ops::gelu_bwd(c_.dev, A[kActFc1].ptr(), dact.ptr(), dact.ptr(), N * f);
  const MH_Tensor dy = block(dact.ptr(), 0);
  if (w.fc1_b >= 0) ops::bias_bwd(c_.dev, dact.ptr(), c_.G(w.fc1_b), N, f);
  ops::linear_dw(c_.dev, dact.ptr(), in, c_.G(w.fc1_w), N, h, f);
  ops::gemm(c_.dev, dy, c_.P(w.fc1_w).t({1, f, h}), dx.t({1, N, h}), false, false, 0);
  lora_backward(c_, w.fc1_lora, drop, kLoraFc1, in, dy, dx.ptr(), h, f);
}

// ---- SwiGLU ---------------------------------------------------------------

Buffer SwigluMlpPart::ones() const {
  Buffer out = c_.activation(kWork, c_.d.rows());
  ops::fill(c_.dev, out.ptr(), c_.d.rows(), 1);
  return out;
}

void SwigluMlpPart::forward(LayerActivations& A, const LayerParamIds& w, const LayerPass&,
                            const LoraDropout& drop) const {
  const int64_t N = c_.d.rows(), f = c_.d.local_ffn();
  if (!A.has(kActFc1)) {
    Buffer gathered;
    TypedPtr in = c_.tp.enter_fwd(A[kActLn2].ptr(), gathered);
    A[kActFc1] = c_.activation(kAct, N * 2 * f);
    project(in, A[kActFc1].ptr(), 0, w.gate_w, w.gate_b, w.gate_lora, drop, kLoraGate);
    project(in, A[kActFc1].ptr(), f, w.fc1_w, w.fc1_b, w.fc1_lora, drop, kLoraFc1);
  }
  if (A.has(kActGelu)) return;
  A[kActGelu] = c_.activation(kAct, N * f);
  ops::swiglu(c_.dev, A[kActFc1].ptr(), A[kActGelu].ptr(), N, f);
}

// The half is strided, which the bias op does not take: the bias is added
// as the rank-1 product ones[N] x bias[f] instead.
void SwigluMlpPart::project(TypedPtr in, TypedPtr fc1, int64_t first, int weight, int bias, const LoraIds& lora,
                            const LoraDropout& drop, LoraTarget target) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, f = c_.d.local_ffn();
  ops::gemm(c_.dev, in.t({1, N, h}), c_.P(weight).t({1, f, h}), block(fc1, first), false, true, 0);
  if (bias >= 0) ops::gemm(c_.dev, ones().t({1, N, 1}), c_.P(bias).t({1, 1, f}), block(fc1, first), false, false, 1);
  lora_forward(c_, lora, drop, target, in, block(fc1, first), h, f);
}

void SwigluMlpPart::backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                             Buffer& dx) const {
  const int64_t N = c_.d.rows(), f = c_.d.local_ffn();
  Buffer gathered;
  TypedPtr in = c_.tp.enter_fwd(A[kActLn2].ptr(), gathered);
  Buffer dfc1 = c_.activation(kWork, N * 2 * f);
  ops::swiglu_bwd(c_.dev, A[kActFc1].ptr(), dact.ptr(), dfc1.ptr(), N, f);
  dact.release();
  project_bwd(in, dfc1.ptr(), 0, w.gate_w, w.gate_b, w.gate_lora, drop, kLoraGate, dx.f32(), 0);
  project_bwd(in, dfc1.ptr(), f, w.fc1_w, w.fc1_b, w.fc1_lora, drop, kLoraFc1, dx.f32(), 1);
}

void SwigluMlpPart::project_bwd(TypedPtr in, TypedPtr dfc1, int64_t first, int weight, int bias, const LoraIds& lora,
                                const LoraDropout& drop, LoraTarget target, float* dx, float beta) const {
  const int64_t N = c_.d.rows(), h = c_.d.hidden, f = c_.d.local_ffn();
  const MH_Tensor dy = block(dfc1, first);
  if (c_.G(weight) != nullptr) {  // a frozen base computes no gradient of its own
    if (bias >= 0) ops::gemm(c_.dev, ones().t({1, N, 1}), dy, TypedPtr(c_.G(bias)).t({1, 1, f}), true, false, 1);
    ops::gemm(c_.dev, dy, in.t({1, N, h}), TypedPtr(c_.G(weight)).t({1, f, h}), true, false, 1);
  }
  ops::gemm(c_.dev, dy, c_.P(weight).t({1, f, h}), TypedPtr(dx).t({1, N, h}), false, false, beta);
  lora_backward(c_, lora, drop, target, in, dy, TypedPtr(dx), h, f);
}

}  // namespace mh
