// What the trainer draws training and validation samples from: sample i is
// seq_len + 1 tokens, a function of i alone, so every parallel layout and
// every resume that asks for global sample i gets the same tokens.
#pragma once

#include <cstdint>

namespace mh::data {

class Samples {
 public:
  virtual ~Samples() = default;
  // Samples in one pass over the data (one epoch).
  virtual int64_t size() const = 0;
  // Writes the seq_len + 1 tokens of sample `index` (any index >= 0; past
  // size() continues into later epochs). Safe to call from many threads.
  virtual void get(int64_t index, int32_t* out) const = 0;
};

}  // namespace mh::data
