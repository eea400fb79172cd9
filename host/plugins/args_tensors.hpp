// The MH_Tensor members of every args struct that carries tensors (the
// kernels ops' and the collectives'), listed once: the host sums their
// bytes for observers and places them on the rank's device, and the
// adapter for ABI 1.x plugins converts them to 1.x's shorter tensor.
#pragma once

#include <megahost/abi.h>

#include <array>
#include <type_traits>

namespace mh {

template <class Args>
struct ArgsTensors;  // static constexpr std::array members: pointers to its MH_Tensor members

template <>
struct ArgsTensors<MH_GemmArgs> {
  static constexpr std::array members{&MH_GemmArgs::a, &MH_GemmArgs::b, &MH_GemmArgs::c};
};
template <>
struct ArgsTensors<MH_LayerNormArgs> {
  static constexpr std::array members{&MH_LayerNormArgs::x,   &MH_LayerNormArgs::weight, &MH_LayerNormArgs::bias,
                                      &MH_LayerNormArgs::out, &MH_LayerNormArgs::mean,   &MH_LayerNormArgs::rstd};
};
template <>
struct ArgsTensors<MH_LayerNormBwdArgs> {
  static constexpr std::array members{
      &MH_LayerNormBwdArgs::dout, &MH_LayerNormBwdArgs::x,  &MH_LayerNormBwdArgs::weight,  &MH_LayerNormBwdArgs::mean,
      &MH_LayerNormBwdArgs::rstd, &MH_LayerNormBwdArgs::dx, &MH_LayerNormBwdArgs::dweight, &MH_LayerNormBwdArgs::dbias};
};
template <>
struct ArgsTensors<MH_ElementwiseArgs> {
  static constexpr std::array members{&MH_ElementwiseArgs::x, &MH_ElementwiseArgs::y, &MH_ElementwiseArgs::out};
};
template <>
struct ArgsTensors<MH_BiasArgs> {
  static constexpr std::array members{&MH_BiasArgs::x, &MH_BiasArgs::bias, &MH_BiasArgs::out};
};
template <>
struct ArgsTensors<MH_SoftmaxArgs> {
  static constexpr std::array members{&MH_SoftmaxArgs::x, &MH_SoftmaxArgs::out, &MH_SoftmaxArgs::dout,
                                      &MH_SoftmaxArgs::dx, &MH_SoftmaxArgs::starts};
};
template <>
struct ArgsTensors<MH_DropoutArgs> {
  static constexpr std::array members{&MH_DropoutArgs::x, &MH_DropoutArgs::residual, &MH_DropoutArgs::out,
                                      &MH_DropoutArgs::mask};
};
template <>
struct ArgsTensors<MH_EmbeddingArgs> {
  static constexpr std::array members{&MH_EmbeddingArgs::table, &MH_EmbeddingArgs::ids, &MH_EmbeddingArgs::out};
};
template <>
struct ArgsTensors<MH_XentArgs> {
  static constexpr std::array members{&MH_XentArgs::logits, &MH_XentArgs::targets, &MH_XentArgs::row_max,
                                      &MH_XentArgs::sum_exp, &MH_XentArgs::target_logit};
};
template <>
struct ArgsTensors<MH_AdamWArgs> {
  static constexpr std::array members{&MH_AdamWArgs::param, &MH_AdamWArgs::grad, &MH_AdamWArgs::m, &MH_AdamWArgs::v};
};
template <>
struct ArgsTensors<MH_SumSquaresArgs> {
  static constexpr std::array members{&MH_SumSquaresArgs::x, &MH_SumSquaresArgs::out};
};
template <>
struct ArgsTensors<MH_RmsNormArgs> {
  static constexpr std::array members{&MH_RmsNormArgs::x, &MH_RmsNormArgs::weight, &MH_RmsNormArgs::out,
                                      &MH_RmsNormArgs::rstd};
};
template <>
struct ArgsTensors<MH_RmsNormBwdArgs> {
  static constexpr std::array members{&MH_RmsNormBwdArgs::dout, &MH_RmsNormBwdArgs::x,  &MH_RmsNormBwdArgs::weight,
                                      &MH_RmsNormBwdArgs::rstd, &MH_RmsNormBwdArgs::dx, &MH_RmsNormBwdArgs::dweight};
};
template <>
struct ArgsTensors<MH_RopeArgs> {
  static constexpr std::array members{&MH_RopeArgs::x, &MH_RopeArgs::out, &MH_RopeArgs::positions};
};
template <>
struct ArgsTensors<MH_SwigluArgs> {
  static constexpr std::array members{&MH_SwigluArgs::x, &MH_SwigluArgs::out, &MH_SwigluArgs::dout, &MH_SwigluArgs::dx};
};
template <>
struct ArgsTensors<MH_StridedCopyArgs> {
  static constexpr std::array members{&MH_StridedCopyArgs::x, &MH_StridedCopyArgs::out};
};
template <>
struct ArgsTensors<MH_AttentionArgs> {
  static constexpr std::array members{&MH_AttentionArgs::q,     &MH_AttentionArgs::k,   &MH_AttentionArgs::v,
                                      &MH_AttentionArgs::out,   &MH_AttentionArgs::lse, &MH_AttentionArgs::dout,
                                      &MH_AttentionArgs::dq,    &MH_AttentionArgs::dk,  &MH_AttentionArgs::dv,
                                      &MH_AttentionArgs::starts};
};
template <>
struct ArgsTensors<MH_CollectiveArgs> {
  static constexpr std::array members{&MH_CollectiveArgs::send, &MH_CollectiveArgs::recv};
};
template <>
struct ArgsTensors<MH_AllToAllArgs> {
  static constexpr std::array members{&MH_AllToAllArgs::send, &MH_AllToAllArgs::recv};
};

// Calls f(tensor) for every tensor member of `args`.
template <class Args, class F>
void for_each_tensor(Args& args, F&& f) {
  for (auto member : ArgsTensors<std::remove_const_t<Args>>::members) f(args.*member);
}

}  // namespace mh
