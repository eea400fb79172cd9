// The "cuda" kernels component: one CUDA device per instance, every op on
// the instance's own stream, GEMM through cuBLAS and the other ops our own
// kernels (ops/). Activations and GEMM inputs are bf16 (fp32 accumulation)
// or fp32, as `dtype` says; docs/gpu.md has the details.
#pragma once

#include "blas.hpp"
#include "caching_allocator.hpp"
#include "validate.hpp"

#include <megahost/plugin.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

namespace mh::kernels {

class CudaKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  // softmax takes decode's [G, Q, T] scores (validate.cpp checks them).
  static constexpr uint64_t capabilities =
      MH_KERNELS_CAP_PARTIAL_SOFTMAX | MH_KERNELS_CAP_DOCUMENTS | MH_KERNELS_CAP_ATTENTION_ACCUMULATE;
  static constexpr MH_OptionSpec options[] = {
      opt_int("device", "-1", -1, 1023, "CUDA device; -1 = this rank's local rank modulo the number of devices"),
      opt_choice("dtype", "\"bf16\"", "bf16|fp32",
                 "dtype of activations and GEMM inputs: bf16 (fp32 accumulation) or fp32"),
      opt_double("peak_tflops", "0", 0, 1e6,
                 "peak TFLOP/s reported for MFU; 0 = measure a GEMM of the compute dtype when created"),
  };

  explicit CudaKernels(const CreateContext& ctx);
  ~CudaKernels();
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  void device_info(MH_DeviceInfo& out) const;
  void* alloc(uint64_t bytes);
  void free(void* ptr) noexcept;
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind);
  void synchronize();
  // Ops are enqueued on it (MH_EXTENSION_STREAM, plugin.hpp).
  void* stream() { return stream_.get(); }

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
  struct StreamDeleter {
    void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
  };

  // Makes the instance's device current on the calling thread (ranks may
  // share a process, each thread with its own device) and returns the stream.
  cudaStream_t on_device() const;
  // Device scratch of at least `bytes` for an op's partial sums, kept
  // between calls; ops are ordered on the stream, so one buffer serves all.
  void* scratch(uint64_t bytes);
  Target target() const { return {compute_, {MH_DEVICE_CUDA, device_}}; }

  int device_;
  MH_DType compute_;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  CachingAllocator memory_;
  Blas blas_;
  void* scratch_ = nullptr;
  uint64_t scratch_bytes_ = 0;
  uint64_t memory_bytes_ = 0;
  double peak_flops_ = 0;
  std::string name_;
};

}  // namespace mh::kernels
