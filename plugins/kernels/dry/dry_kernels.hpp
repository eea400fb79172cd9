// The "dry" kernels component: allocates nothing and computes nothing. Every
// op checks its arguments exactly as a computing component would (the checks
// are shared, common/validate.hpp) and returns. The engine runs against it to
// learn the exact memory of a configuration, at any scale, without running it.
#pragma once

#include "validate.hpp"

#include <megahost/plugin.hpp>

namespace mh::kernels {

class DryKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  // softmax takes decode's [G, Q, T] scores (validate.cpp checks them).
  static constexpr uint64_t capabilities =
      MH_KERNELS_CAP_PARTIAL_SOFTMAX | MH_KERNELS_CAP_DOCUMENTS | MH_KERNELS_CAP_ATTENTION_ACCUMULATE;
  static constexpr MH_OptionSpec options[] = {
      opt_double("peak_gflops", "1000", 1e-3, 1e9, "peak GFLOP/s of the modelled device, for cost estimates"),
      opt_choice("dtype", "\"fp32\"", "fp32|bf16|f16", "dtype the modelled device computes in"),
  };

  explicit DryKernels(const CreateContext& ctx);

  void device_info(MH_DeviceInfo& out) const;
  void* alloc(uint64_t bytes);
  void free(void*) noexcept {}
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind);
  void synchronize() {}

  void gemm(const MH_GemmArgs& args) { check_gemm(args, target()); }
  void layernorm(const MH_LayerNormArgs& args) { check_layernorm(args, target()); }
  void layernorm_bwd(const MH_LayerNormBwdArgs& args) { check_layernorm_bwd(args, target()); }
  void elementwise(const MH_ElementwiseArgs& args) { check_elementwise(args, target()); }
  void bias_add(const MH_BiasArgs& args) { check_bias_add(args, target()); }
  void bias_bwd(const MH_BiasArgs& args) { check_bias_bwd(args, target()); }
  void softmax(const MH_SoftmaxArgs& args) { check_softmax(args, target()); }
  void softmax_bwd(const MH_SoftmaxArgs& args) { check_softmax_bwd(args, target()); }
  void dropout(const MH_DropoutArgs& args) { check_dropout(args, target()); }
  void dropout_bwd(const MH_DropoutArgs& args) { check_dropout_bwd(args, target()); }
  void embedding(const MH_EmbeddingArgs& args) { check_embedding(args, target(), "embedding"); }
  void embedding_bwd(const MH_EmbeddingArgs& args) { check_embedding(args, target(), "embedding_bwd"); }
  void xent(const MH_XentArgs& args) { check_xent(args, target()); }
  void adamw(const MH_AdamWArgs& args) { check_adamw(args, target()); }
  void sum_squares(const MH_SumSquaresArgs& args) { check_sum_squares(args, target()); }
  void rmsnorm(const MH_RmsNormArgs& args) { check_rmsnorm(args, target()); }
  void rmsnorm_bwd(const MH_RmsNormBwdArgs& args) { check_rmsnorm_bwd(args, target()); }
  void rope(const MH_RopeArgs& args) { check_rope(args, target()); }
  void swiglu(const MH_SwigluArgs& args) { check_swiglu(args, target()); }
  void swiglu_bwd(const MH_SwigluArgs& args) { check_swiglu_bwd(args, target()); }
  void strided_copy(const MH_StridedCopyArgs& args) { check_strided_copy(args, target()); }
  void attention(const MH_AttentionArgs& args) { check_attention(args, target()); }
  void attention_bwd(const MH_AttentionArgs& args) { check_attention_bwd(args, target()); }

 private:
  // device_info says cpu, so the engine places its tensors there.
  Target target() const { return {compute_, {MH_DEVICE_CPU, 0}}; }

  MH_DType compute_;
  double peak_flops_;
};

}  // namespace mh::kernels
