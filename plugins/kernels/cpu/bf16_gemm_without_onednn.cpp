// A build without oneDNN (CMake found no libdnnl): no bf16 units are used,
// and every bf16 GEMM takes the component's f32 path.
#include "bf16_gemm.hpp"

namespace mh::kernels::cpu {

struct Bf16Gemm::Primitives {};

bool avx512_allowed() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }

Bf16Units detect_bf16_units() { return Bf16Units::kNone; }

Bf16Gemm::Bf16Gemm(int threads) : threads_(threads) {}

Bf16Gemm::~Bf16Gemm() = default;

bool Bf16Gemm::run(const MH_GemmArgs&, const GemmDims&) { return false; }

}  // namespace mh::kernels::cpu
