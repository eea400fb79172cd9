#include "bf16_rows.hpp"

#include <immintrin.h>

#include <cstring>

#include "bf16.hpp"
#include "bf16_gemm.hpp"

namespace mh::kernels::cpu {
namespace {

void widen_portable(float* out, const uint16_t* in, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}

void narrow_portable(uint16_t* out, const float* in, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

// 16 lanes at a time with unaligned loads and stores (the rows of a view
// start anywhere); the tail through the portable loop.
__attribute__((target("avx512f,avx512bw"))) void widen_avx512(float* out, const uint16_t* in, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)));
  }
  widen_portable(out + i, in + i, n - i);
}

// Round to nearest even on the integer bits, NaNs quietened instead (a
// rounding carry could turn one into inf): to_bf16's arithmetic, in lanes.
__attribute__((target("avx512f,avx512bw"))) void narrow_avx512(uint16_t* out, const float* in, int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(in + i));
    const __m512i even = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(half, even));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), inf);
    const __m512i kept = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(bits, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(kept, 16)));
  }
  narrow_portable(out + i, in + i, n - i);
}

const bool kHasAvx512 = avx512_allowed();

}  // namespace

void widen_row(float* out, const uint16_t* in, int64_t n) {
  if (kHasAvx512) return widen_avx512(out, in, n);
  widen_portable(out, in, n);
}

void narrow_row(uint16_t* out, const float* in, int64_t n) {
  if (kHasAvx512) return narrow_avx512(out, in, n);
  narrow_portable(out, in, n);
}

void convert(void* out, int32_t out_type, const void* x, int32_t x_type, int64_t n, int threads) {
  if (out == x || n == 0) return;
  const int64_t blocks = (n + kBlockElements - 1) / kBlockElements;
  const size_t out_size = out_type == MH_BF16 ? 2 : 4, x_size = x_type == MH_BF16 ? 2 : 4;
#pragma omp parallel for num_threads(team(threads, n)) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kBlockElements, count = std::min(kBlockElements, n - first);
    void* o = static_cast<char*>(out) + first * out_size;
    const void* i = static_cast<const char*>(x) + first * x_size;
    if (out_type == x_type) std::memcpy(o, i, count * out_size);
    else if (out_type == MH_BF16) narrow_row(static_cast<uint16_t*>(o), static_cast<const float*>(i), count);
    else widen_row(static_cast<float*>(o), static_cast<const uint16_t*>(i), count);
  }
}

F32Vector::F32Vector(const MH_Tensor& t, int64_t n) : data_(static_cast<const float*>(t.data)) {
  if (t.data == nullptr || t.dtype != MH_BF16) return;
  copy_.resize(static_cast<size_t>(n));
  widen_row(copy_.data(), static_cast<const uint16_t*>(t.data), n);
  data_ = copy_.data();
}

void Partials::add_into(const MH_Tensor& t) const {
  std::vector<float> total(static_cast<size_t>(n_), 0.0f);
  for (size_t first = 0; first < sums_.size(); first += static_cast<size_t>(n_)) {
#pragma omp simd
    for (int64_t i = 0; i < n_; ++i) total[i] += sums_[first + i];
  }
  if (t.dtype != MH_BF16) {
    float* out = static_cast<float*>(t.data);
#pragma omp simd
    for (int64_t i = 0; i < n_; ++i) out[i] += total[i];
    return;
  }
  auto* out = static_cast<uint16_t*>(t.data);
  for (int64_t i = 0; i < n_; ++i) out[i] = to_bf16(from_bf16(out[i]) + total[i]);
}

}  // namespace mh::kernels::cpu
