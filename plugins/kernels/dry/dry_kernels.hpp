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
  void* stream() { return nullptr; }

  void gemm(const MH_GemmArgs& args) { check_gemm(args, compute_); }
  void layernorm(const MH_LayerNormArgs& args) { check_layernorm(args, compute_); }
  void layernorm_bwd(const MH_LayerNormBwdArgs& args) { check_layernorm_bwd(args, compute_); }
  void elementwise(const MH_ElementwiseArgs& args) { check_elementwise(args, compute_); }
  void bias_add(const MH_BiasArgs& args) { check_bias_add(args, compute_); }
  void bias_bwd(const MH_BiasArgs& args) { check_bias_bwd(args, compute_); }
  void softmax(const MH_SoftmaxArgs& args) { check_softmax(args, compute_); }
  void softmax_bwd(const MH_SoftmaxArgs& args) { check_softmax_bwd(args, compute_); }
  void dropout(const MH_DropoutArgs& args) { check_dropout(args, compute_); }
  void dropout_bwd(const MH_DropoutArgs& args) { check_dropout_bwd(args, compute_); }
  void embedding(const MH_EmbeddingArgs& args) { check_embedding(args, compute_, "embedding"); }
  void embedding_bwd(const MH_EmbeddingArgs& args) { check_embedding(args, compute_, "embedding_bwd"); }
  void xent(const MH_XentArgs& args) { check_xent(args, compute_); }
  void adamw(const MH_AdamWArgs& args) { check_adamw(args); }
  void sum_squares(const MH_SumSquaresArgs& args) { check_sum_squares(args, compute_); }
  void rmsnorm(const MH_RmsNormArgs& args) { check_rmsnorm(args, compute_); }
  void rmsnorm_bwd(const MH_RmsNormBwdArgs& args) { check_rmsnorm_bwd(args, compute_); }
  void rope(const MH_RopeArgs& args) { check_rope(args, compute_); }
  void swiglu(const MH_SwigluArgs& args) { check_swiglu(args, compute_); }
  void swiglu_bwd(const MH_SwigluArgs& args) { check_swiglu_bwd(args, compute_); }
  void strided_copy(const MH_StridedCopyArgs& args) { check_strided_copy(args); }
  void attention(const MH_AttentionArgs& args) { check_attention(args, compute_); }
  void attention_bwd(const MH_AttentionArgs& args) { check_attention_bwd(args, compute_); }

 private:
  MH_DType compute_;
  double peak_flops_;
};

}  // namespace mh::kernels
