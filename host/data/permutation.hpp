// A pseudo-random permutation of [0, n) computed one element at a time, so an
// epoch of any size is shuffled without storing its order, identically on
// every rank and platform: a keyed Feistel network over the smallest even
// number of bits that covers n, with cycle-walking to stay below n.
#pragma once

#include <cstdint>

namespace mh::data {

class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key);
  // The element at position i < n.
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t feistel(uint64_t x) const;

  uint64_t n_;
  uint64_t key_;
  unsigned half_bits_;
};

}  // namespace mh::data
