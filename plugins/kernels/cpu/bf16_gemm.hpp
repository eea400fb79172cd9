// bf16 GEMMs on the CPU's bf16 units: oneDNN's matmul primitive (what
// PyTorch's and OpenVINO's CPU backends use), bf16 inputs, f32 accumulation,
// the output in c's dtype (f32, or bf16 rounded once). oneDNN picks its
// kernel by what the CPU has at run time: AMX tiles, else AVX512-BF16
// (vdpbf16ps). Without either, bf16 has no hardware units and the component
// keeps its f32 path (staged operands, OpenBLAS sgemm). docs/kernels-cpu.md.
#pragma once

#include <megahost/abi.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <optional>

#include "validate.hpp"

namespace mh::kernels::cpu {

// What runs a bf16 GEMM on this CPU, best first.
enum class Bf16Units { kAmx, kAvx512Bf16, kNone };

// oneDNN's view of the CPU, capped by ONEDNN_MAX_CPU_ISA when that is set
// (how a test or a user forces a lesser path on a better CPU).
Bf16Units detect_bf16_units();
// "AMX (oneDNN avx512_core_amx)", "AVX512-BF16 (...)" or "none: f32 GEMM (OpenBLAS)"
const char* describe(Bf16Units units);

class Bf16Gemm {
 public:
  explicit Bf16Gemm(int threads);

  // c = alpha * op(a) @ op(b) + beta * c for bf16 a and b; false when oneDNN
  // has no kernel for these views (the caller then takes the f32 path).
  bool run(const MH_GemmArgs& args, const GemmDims& d);

 private:
  // Everything a primitive depends on: the views' dims and strides, c's
  // dtype, alpha and beta (bits).
  using Key = std::array<int64_t, 15>;
  struct Primitive {
    dnnl::matmul matmul;
    dnnl::memory::desc a, b, c;
  };
  const std::optional<Primitive>& primitive(const Key& key, const MH_GemmArgs& args, const GemmDims& d);

  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  // One primitive per shape, built on first use (nullopt: oneDNN has none).
  // The engine calls the same few shapes every step.
  std::map<Key, std::optional<Primitive>> cache_;
};

}  // namespace mh::kernels::cpu
