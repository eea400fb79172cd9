#include "f32_staging.hpp"

#include "bf16.hpp"
#include "ops/ops.hpp"

namespace mh::kernels::cpu {
namespace {

// Covers strided views (a GEMM's heads inside a wider row, batch stride 0)
// as well as contiguous ones. Elements in the gaps round-trip unchanged:
// every bf16 value is exact in f32.
int64_t span_of(const MH_Tensor& t) {
  int64_t last = 0;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return 0;
    last += (t.shape[i] - 1) * t.strides[i];
  }
  return last + 1;
}

}  // namespace

float* F32Staging::stage(const MH_Tensor& t, bool written) {
  if (t.data == nullptr) return nullptr;
  if (t.dtype == MH_F32) return static_cast<float*>(t.data);
  for (Staged& s : staged_)
    if (s.data == t.data) {
      s.written |= written;
      return s.copy.data();
    }
  const int64_t n = span_of(t);
  Staged& s = staged_.emplace_back(Staged{t.data, n, written, std::vector<float>(static_cast<size_t>(n))});
  const auto* bits = static_cast<const uint16_t*>(t.data);
  float* copy = s.copy.data();
#pragma omp parallel for simd num_threads(team(threads_, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) copy[i] = from_bf16(bits[i]);
  return copy;
}

void F32Staging::write_back() {
  for (const Staged& s : staged_) {
    if (!s.written) continue;
    auto* bits = static_cast<uint16_t*>(s.data);
    const float* copy = s.copy.data();
#pragma omp parallel for simd num_threads(team(threads_, s.span)) schedule(static)
    for (int64_t i = 0; i < s.span; ++i) bits[i] = to_bf16(copy[i]);
  }
}

}  // namespace mh::kernels::cpu
