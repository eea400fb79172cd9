// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11). A draw is a pure function of
// (seed, counter), with no state to carry, so every rank, every parallel
// layout and every recomputation that names the same global element gets the
// same number. The host draws parameter init with it, keyed by an element's
// global position; the kernels draw dropout masks with it (MH_RngSpan).
//
// Header-only and usable from CUDA device code as well as from the host.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MH_HOST_DEVICE __host__ __device__
#else
#define MH_HOST_DEVICE
#endif

namespace mh::rng {

struct PhiloxBlock {
  uint32_t v[4];
};

struct PhiloxKey {
  uint32_t k[2];
};

// Philox4x32's multipliers, and the Weyl constants that bump the key
// between rounds (Random123's PHILOX_M4x32_* and PHILOX_W32_*).
constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One Philox round: two 32x32->64 bit products mixed Feistel-style.
MH_HOST_DEVICE inline PhiloxBlock philox_round(PhiloxBlock c, PhiloxKey key) {
  const uint64_t p0 = uint64_t{kPhiloxM0} * c.v[0];
  const uint64_t p1 = uint64_t{kPhiloxM1} * c.v[2];
  return PhiloxBlock{{static_cast<uint32_t>(p1 >> 32) ^ c.v[1] ^ key.k[0], static_cast<uint32_t>(p1),
                      static_cast<uint32_t>(p0 >> 32) ^ c.v[3] ^ key.k[1], static_cast<uint32_t>(p0)}};
}

// The raw generator: 10 rounds, the key bumped by the Weyl constants between
// rounds. Matches Random123's philox4x32_R(10, counter, key).
MH_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.k[0] += kPhiloxW0;
      key.k[1] += kPhiloxW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

// The 128 random bits of (seed, counter): the counter fills the low half of
// Philox's 128-bit counter, the seed its 64-bit key.
MH_HOST_DEVICE inline PhiloxBlock draw(uint64_t seed, uint64_t counter) {
  return philox4x32_10(
      PhiloxBlock{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u}},
      PhiloxKey{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
}

// The top 24 bits as a float in [0, 1): every value is exact in f32, so the
// host and a device agree bit for bit, and 1 is never returned.
MH_HOST_DEVICE inline float unit_float(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Uniform in [0, 1) from the first word of the draw.
MH_HOST_DEVICE inline float uniform(uint64_t seed, uint64_t counter) {
  return unit_float(draw(seed, counter).v[0]);
}

// Standard normal by Box-Muller from the first two words of the same draw.
MH_HOST_DEVICE inline float normal(uint64_t seed, uint64_t counter) {
  const PhiloxBlock b = draw(seed, counter);
  const float radius_u = unit_float(b.v[0]) + (1.0f / 16777216.0f);  // (0, 1]: log stays finite
  const float angle_u = unit_float(b.v[1]);
  return sqrtf(-2.0f * logf(radius_u)) * cosf(6.28318530717958648f * angle_u);
}

// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", OOPSLA'14): a bijective mixer that turns
// structured keys (seed, step, index) into independent-looking 64-bit seeds
// and stream keys.
MH_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace mh::rng
