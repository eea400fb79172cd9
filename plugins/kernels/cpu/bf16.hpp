// bf16 as the top 16 bits of an f32, rounded to nearest even: the rounding
// the cuda kernels' __float2bfloat16 does, so both components hold the same
// bits for the same value.
#pragma once

#include <bit>
#include <cstdint>

namespace mh::kernels::cpu {

inline uint16_t to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // Rounding could carry a NaN's payload into the exponent and make it inf.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline float from_bf16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

// An element of an f32 or a bf16 tensor as f32, for loops written once for both.
inline float widen(float x) { return x; }
inline float widen(uint16_t bits) { return from_bf16(bits); }

}  // namespace mh::kernels::cpu
