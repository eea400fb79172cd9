// The "cpu" kernels component: host memory stands in for device memory, GEMM
// goes through OpenBLAS and the other ops are the loops in ops/, each rank's
// work running on that rank's own OpenMP team. f32, or bf16 storage with f32
// compute: bf16 GEMMs on the CPU's bf16 units where it has them
// (bf16_gemm.hpp), the other ops converting as they load and store.
#pragma once

#include <megahost/plugin.hpp>

#include "bf16_gemm.hpp"
#include "block_cache.hpp"
#include "validate.hpp"

#include <optional>
#include <string>

namespace mh::kernels {

namespace cpu {
// The component's line in --list_plugins, naming what runs bf16 GEMMs here.
const char* plugin_description();
}  // namespace cpu

class CpuKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  // softmax takes decode's [G, Q, T] scores (validate.cpp checks them).
  static constexpr uint64_t capabilities =
      MH_KERNELS_CAP_PARTIAL_SOFTMAX | MH_KERNELS_CAP_DOCUMENTS | MH_KERNELS_CAP_ATTENTION_ACCUMULATE;
  static constexpr MH_OptionSpec options[] = {
      opt_int("threads", "0", 0, 1024,
              "OpenMP threads per rank; 0 = this process's physical cores split between its ranks"),
      opt_double("peak_gflops", "0", 0, 1e9,
                 "peak GFLOP/s reported for MFU; 0 = the cores' theoretical peak (FMA units x lanes x 2 x clock)"),
      opt_choice("dtype", "\"fp32\"", "fp32|bf16",
                 "dtype of activations and GEMM inputs: fp32, or bf16 with fp32 accumulation"),
      opt_double("memory_gb", "0", 0, 1e6,
                 "memory each rank may use, in GiB; 0 = the machine's physical memory split between its ranks"),
      opt_choice("bf16_gemm", "\"auto\"", "auto|f32",
                 "bf16 GEMMs: auto = oneDNN on the CPU's bf16 units (AMX, else AVX512-BF16) where it has them, "
                 "else f32; f32 = OpenBLAS sgemm on f32 copies"),
  };

  explicit CpuKernels(const CreateContext& ctx);

  void device_info(MH_DeviceInfo& out) const;
  void* alloc(uint64_t bytes);
  void free(void* ptr) noexcept;
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind);
  void synchronize() {}

  void gemm(const MH_GemmArgs& args);
  void layernorm(const MH_LayerNormArgs& args);
  void layernorm_bwd(const MH_LayerNormBwdArgs& args);
  void elementwise(const MH_ElementwiseArgs& args);
  void bias_add(const MH_BiasArgs& args);
  void bias_bwd(const MH_BiasArgs& args);
  void softmax(const MH_SoftmaxArgs& args);
  void softmax_bwd(const MH_SoftmaxArgs& args);
  void dropout(const MH_DropoutArgs& args);
  void dropout_bwd(const MH_DropoutArgs& args);
  void embedding(const MH_EmbeddingArgs& args);
  void embedding_bwd(const MH_EmbeddingArgs& args);
  void xent(const MH_XentArgs& args);
  void adamw(const MH_AdamWArgs& args);
  void sum_squares(const MH_SumSquaresArgs& args);
  void rmsnorm(const MH_RmsNormArgs& args);
  void rmsnorm_bwd(const MH_RmsNormBwdArgs& args);
  void rope(const MH_RopeArgs& args);
  void swiglu(const MH_SwigluArgs& args);
  void swiglu_bwd(const MH_SwigluArgs& args);
  void strided_copy(const MH_StridedCopyArgs& args);
  void attention(const MH_AttentionArgs& args);
  void attention_bwd(const MH_AttentionArgs& args);

 private:
  // Host memory; every op runs before it returns, so there is no stream.
  Target target() const { return {compute_, {MH_DEVICE_CPU, 0}}; }

  MH_DType compute_;
  int threads_;
  int ranks_in_process_;
  uint64_t memory_bytes_;  // this rank's share (memory_gb, or physical / ranks)
  double peak_flops_;
  std::string name_;
  cpu::BlockCache memory_;
  std::optional<cpu::Bf16Gemm> bf16_gemm_;  // with dtype bf16 on a CPU with bf16 units
};

}  // namespace mh::kernels
