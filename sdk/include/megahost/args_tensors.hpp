// The MH_Tensor members of every args struct that carries tensors (the
// kernels ops' and the collectives'), listed once, in struct order: the
// host places them on the rank's device and sums their bytes for
// observers, the kernels refuse one on another device, and the host's
// adapter for ABI 1.x plugins cuts them to 1.x's shorter tensor.
#pragma once

#include <megahost/abi.h>

#include <array>
#include <cstddef>
#include <type_traits>

namespace mh {

// One MH_Tensor member of an args struct: its name, for messages, and where
// it lies.
struct TensorField {
  const char* name;
  size_t offset;
};
#define MH_TENSOR_FIELD(Args, member) \
  ::mh::TensorField { #member, offsetof(Args, member) }

template <class Args>
struct ArgsTensors;  // static constexpr std::array fields: its TensorFields

template <>
struct ArgsTensors<MH_GemmArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_GemmArgs, a), MH_TENSOR_FIELD(MH_GemmArgs, b),
                                     MH_TENSOR_FIELD(MH_GemmArgs, c)};
};
template <>
struct ArgsTensors<MH_LayerNormArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_LayerNormArgs, x),    MH_TENSOR_FIELD(MH_LayerNormArgs, weight),
                                     MH_TENSOR_FIELD(MH_LayerNormArgs, bias), MH_TENSOR_FIELD(MH_LayerNormArgs, out),
                                     MH_TENSOR_FIELD(MH_LayerNormArgs, mean), MH_TENSOR_FIELD(MH_LayerNormArgs, rstd)};
};
template <>
struct ArgsTensors<MH_LayerNormBwdArgs> {
  static constexpr std::array fields{
      MH_TENSOR_FIELD(MH_LayerNormBwdArgs, dout),    MH_TENSOR_FIELD(MH_LayerNormBwdArgs, x),
      MH_TENSOR_FIELD(MH_LayerNormBwdArgs, weight),  MH_TENSOR_FIELD(MH_LayerNormBwdArgs, mean),
      MH_TENSOR_FIELD(MH_LayerNormBwdArgs, rstd),    MH_TENSOR_FIELD(MH_LayerNormBwdArgs, dx),
      MH_TENSOR_FIELD(MH_LayerNormBwdArgs, dweight), MH_TENSOR_FIELD(MH_LayerNormBwdArgs, dbias)};
};
template <>
struct ArgsTensors<MH_ElementwiseArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_ElementwiseArgs, x), MH_TENSOR_FIELD(MH_ElementwiseArgs, y),
                                     MH_TENSOR_FIELD(MH_ElementwiseArgs, out)};
};
template <>
struct ArgsTensors<MH_BiasArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_BiasArgs, x), MH_TENSOR_FIELD(MH_BiasArgs, bias),
                                     MH_TENSOR_FIELD(MH_BiasArgs, out)};
};
template <>
struct ArgsTensors<MH_SoftmaxArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_SoftmaxArgs, x), MH_TENSOR_FIELD(MH_SoftmaxArgs, out),
                                     MH_TENSOR_FIELD(MH_SoftmaxArgs, dout), MH_TENSOR_FIELD(MH_SoftmaxArgs, dx),
                                     MH_TENSOR_FIELD(MH_SoftmaxArgs, starts)};
};
template <>
struct ArgsTensors<MH_DropoutArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_DropoutArgs, x), MH_TENSOR_FIELD(MH_DropoutArgs, residual),
                                     MH_TENSOR_FIELD(MH_DropoutArgs, out), MH_TENSOR_FIELD(MH_DropoutArgs, mask)};
};
template <>
struct ArgsTensors<MH_EmbeddingArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_EmbeddingArgs, table), MH_TENSOR_FIELD(MH_EmbeddingArgs, ids),
                                     MH_TENSOR_FIELD(MH_EmbeddingArgs, out)};
};
template <>
struct ArgsTensors<MH_XentArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_XentArgs, logits), MH_TENSOR_FIELD(MH_XentArgs, targets),
                                     MH_TENSOR_FIELD(MH_XentArgs, row_max), MH_TENSOR_FIELD(MH_XentArgs, sum_exp),
                                     MH_TENSOR_FIELD(MH_XentArgs, target_logit)};
};
template <>
struct ArgsTensors<MH_AdamWArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_AdamWArgs, param), MH_TENSOR_FIELD(MH_AdamWArgs, grad),
                                     MH_TENSOR_FIELD(MH_AdamWArgs, m), MH_TENSOR_FIELD(MH_AdamWArgs, v)};
};
template <>
struct ArgsTensors<MH_SumSquaresArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_SumSquaresArgs, x), MH_TENSOR_FIELD(MH_SumSquaresArgs, out)};
};
template <>
struct ArgsTensors<MH_RmsNormArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_RmsNormArgs, x), MH_TENSOR_FIELD(MH_RmsNormArgs, weight),
                                     MH_TENSOR_FIELD(MH_RmsNormArgs, out), MH_TENSOR_FIELD(MH_RmsNormArgs, rstd)};
};
template <>
struct ArgsTensors<MH_RmsNormBwdArgs> {
  static constexpr std::array fields{
      MH_TENSOR_FIELD(MH_RmsNormBwdArgs, dout),   MH_TENSOR_FIELD(MH_RmsNormBwdArgs, x),
      MH_TENSOR_FIELD(MH_RmsNormBwdArgs, weight), MH_TENSOR_FIELD(MH_RmsNormBwdArgs, rstd),
      MH_TENSOR_FIELD(MH_RmsNormBwdArgs, dx),     MH_TENSOR_FIELD(MH_RmsNormBwdArgs, dweight)};
};
template <>
struct ArgsTensors<MH_RopeArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_RopeArgs, x), MH_TENSOR_FIELD(MH_RopeArgs, out),
                                     MH_TENSOR_FIELD(MH_RopeArgs, positions)};
};
template <>
struct ArgsTensors<MH_SwigluArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_SwigluArgs, x), MH_TENSOR_FIELD(MH_SwigluArgs, out),
                                     MH_TENSOR_FIELD(MH_SwigluArgs, dout), MH_TENSOR_FIELD(MH_SwigluArgs, dx)};
};
template <>
struct ArgsTensors<MH_StridedCopyArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_StridedCopyArgs, x), MH_TENSOR_FIELD(MH_StridedCopyArgs, out)};
};
template <>
struct ArgsTensors<MH_AttentionArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_AttentionArgs, q),   MH_TENSOR_FIELD(MH_AttentionArgs, k),
                                     MH_TENSOR_FIELD(MH_AttentionArgs, v),   MH_TENSOR_FIELD(MH_AttentionArgs, out),
                                     MH_TENSOR_FIELD(MH_AttentionArgs, lse), MH_TENSOR_FIELD(MH_AttentionArgs, dout),
                                     MH_TENSOR_FIELD(MH_AttentionArgs, dq),  MH_TENSOR_FIELD(MH_AttentionArgs, dk),
                                     MH_TENSOR_FIELD(MH_AttentionArgs, dv),  MH_TENSOR_FIELD(MH_AttentionArgs, starts)};
};
template <>
struct ArgsTensors<MH_CollectiveArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_CollectiveArgs, send),
                                     MH_TENSOR_FIELD(MH_CollectiveArgs, recv)};
};
template <>
struct ArgsTensors<MH_AllToAllArgs> {
  static constexpr std::array fields{MH_TENSOR_FIELD(MH_AllToAllArgs, send), MH_TENSOR_FIELD(MH_AllToAllArgs, recv)};
};

// Calls f(name, tensor) for every tensor member of `args` that its
// struct_size covers (an optional one a caller left out is not there).
template <class Args, class F>
void for_each_tensor(Args& args, F&& f) {
  using Bytes = std::conditional_t<std::is_const_v<Args>, const std::byte, std::byte>;
  using Tensor = std::conditional_t<std::is_const_v<Args>, const MH_Tensor, MH_Tensor>;
  for (const TensorField& field : ArgsTensors<std::remove_const_t<Args>>::fields)
    if (field.offset + sizeof(MH_Tensor) <= args.struct_size)
      f(field.name, *reinterpret_cast<Tensor*>(reinterpret_cast<Bytes*>(&args) + field.offset));
}

}  // namespace mh
