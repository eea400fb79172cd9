// exp and tanh as plain arithmetic that GCC vectorises. libm's expf and
// tanhf are scalar calls: with them GELU, softmax and cross-entropy on GPT-2
// small shapes took as long as the GEMMs around them (docs/kernels-cpu.md).
#pragma once

#include <bit>
#include <cstdint>

namespace mh::kernels::cpu {

// e^x = 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2) / 2, e^r by its
// Taylor series to r^7 (truncation below 1e-8). Relative error below 1e-7.
// x is clamped to [-87, 88] so that 2^n stays a normal float: e^x bottoms out
// at 1.6e-38 instead of 0 and tops out at 1.7e38 instead of inf; NaN stays
// NaN. The clamps are selects, not branches, with -fno-trapping-math.
inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 in two parts: n * kLn2Hi is exact for |n| < 2^8, kLn2Lo holds the rest.
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  // Adding 1.5 * 2^23 rounds to an integer, which lands in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t exponent = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound) + 127u;
  return p * std::bit_cast<float>(exponent << 23);
}

// tanh(x) = 1 - 2 / (e^2x + 1): saturates to +-1 at both ends. Absolute
// error below 2e-7.
inline float fast_tanh(float x) { return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f); }

}  // namespace mh::kernels::cpu
