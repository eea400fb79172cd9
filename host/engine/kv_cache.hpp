// Generation's key/value cache on one rank. For every layer the rank holds
// it keeps the keys and the values of `slots` sequences, `capacity`
// positions each, of the rank's key/value heads: [slots, kv_heads/t,
// capacity, head_dim] in the compute dtype. It is allocated once, before the
// first token, so the dry run of a generate config counts it exactly and a
// run never runs out of memory half-way through a request.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/device.hpp"
#include "engine/model.hpp"

namespace mh {

// A sequence's rows in one forward of generation: `count` rows from row
// `row` of the packed input, at positions past .. past + count - 1 of the
// sequence held in cache slot `slot` (past positions are cached already).
struct SequenceRows {
  int64_t slot, row, count, past;
};

class KvCache {
 public:
  KvCache(Device& device, const ModelDims& d, std::span<const int64_t> layers, int64_t slots, int64_t capacity);

  int64_t slots() const { return slots_; }
  int64_t capacity() const { return capacity_; }
  // Positions [first, first + count) of a slot's keys or values in global
  // layer `layer`: [kv_heads/t, count, head_dim], strided as gemm's views.
  MH_Tensor keys(int64_t layer, int64_t slot, int64_t first, int64_t count) const;
  MH_Tensor values(int64_t layer, int64_t slot, int64_t first, int64_t count) const;

 private:
  MH_Tensor at(const Buffer& b, int64_t slot, int64_t first, int64_t count) const;
  size_t index(int64_t layer) const;

  int64_t groups_, head_dim_, slots_, capacity_;
  std::vector<int64_t> layers_;  // global indices, in the order of keys_ and values_
  std::vector<Buffer> keys_, values_;
};

}  // namespace mh
