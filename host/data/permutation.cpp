#include "data/permutation.hpp"

#include <megahost/error.hpp>
#include <megahost/rng.hpp>

#include <algorithm>
#include <bit>

namespace mh::data {
namespace {
// Luby-Rackoff: four rounds already make a strong pseudo-random permutation;
// two more cost little.
constexpr int kRounds = 6;
}  // namespace

Permutation::Permutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
  require(n > 0, "Permutation: cannot permute an empty range", MH_INTERNAL);
  half_bits_ = std::max(1u, (static_cast<unsigned>(std::bit_width(n - 1)) + 1) / 2);
}

uint64_t Permutation::feistel(uint64_t x) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int round = 0; round < kRounds; ++round) {
    uint64_t next = left ^ (rng::splitmix64(key_ ^ rng::splitmix64(right + static_cast<uint64_t>(round))) & mask);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::operator()(uint64_t i) const {
  if (i >= n_) {
    throw Error(MH_INTERNAL, "Permutation: position " + std::to_string(i) + " is outside [0, " +
                                 std::to_string(n_) + ")");
  }
  // The network permutes [0, 4^half_bits) with 4^half_bits <= 4n, so walking
  // the cycle until it lands below n takes at most four steps on average
  // and always ends, at the latest back at i itself.
  uint64_t x = i;
  do x = feistel(x);
  while (x >= n_);
  return x;
}

}  // namespace mh::data
