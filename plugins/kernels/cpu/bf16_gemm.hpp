// bf16 GEMMs on the CPU's bf16 units: oneDNN's matmul primitive (what
// PyTorch's and OpenVINO's CPU backends use), bf16 inputs, f32 accumulation,
// the output in c's dtype (f32, or bf16 rounded once). oneDNN picks its
// kernel by what the CPU has at run time: AMX tiles, else AVX512-BF16
// (vdpbf16ps). Without either, bf16 has no hardware units and the component
// keeps its f32 path (staged operands, OpenBLAS sgemm). docs/kernels-cpu.md.
#pragma once

#include <megahost/abi.h>

#include <memory>

#include "validate.hpp"

namespace mh::kernels::cpu {

// What runs a bf16 GEMM on this CPU, best first.
enum class Bf16Units { kAmx, kAvx512Bf16, kNone };

// oneDNN's view of the CPU, capped by ONEDNN_MAX_CPU_ISA when that is set
// (how a test or a user forces a lesser path on a better CPU); kNone in a
// build without oneDNN.
Bf16Units detect_bf16_units();
// "AMX (oneDNN avx512_core_amx)", "AVX512-BF16 (...)" or "none: f32 GEMM (OpenBLAS)"
inline const char* describe(Bf16Units units) {
  switch (units) {
    case Bf16Units::kAmx: return "AMX (oneDNN avx512_core_amx)";
    case Bf16Units::kAvx512Bf16: return "AVX512-BF16 (oneDNN avx512_core_bf16)";
    case Bf16Units::kNone: break;
  }
  return "none: f32 GEMM (OpenBLAS)";
}
// Whether the CPU has AVX-512 (F, BW) and ONEDNN_MAX_CPU_ISA allows it: the
// component's own vector code follows the same cap as oneDNN's.
bool avx512_allowed();

class Bf16Gemm {
 public:
  explicit Bf16Gemm(int threads);
  ~Bf16Gemm();
  Bf16Gemm(const Bf16Gemm&) = delete;
  Bf16Gemm& operator=(const Bf16Gemm&) = delete;

  // c = alpha * op(a) @ op(b) + beta * c for bf16 a and b; false when oneDNN
  // has no kernel for these views (the caller then takes the f32 path).
  bool run(const MH_GemmArgs& args, const GemmDims& d);

 private:
  struct Primitives;  // oneDNN's engine, stream and one primitive per shape
  int threads_;
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace mh::kernels::cpu
