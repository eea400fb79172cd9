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
  // Whether some sample's loss mask is not all ones (a dataset with a loss
  // mask beside it, loss_mask.hpp, or data.eod_mask_loss); when not, the
  // trainer skips the masks.
  virtual bool masks_loss() const = 0;
  // Writes the loss mask of sample `index`, whose seq_len + 1 tokens get()
  // wrote to `tokens`: mask[j] = 1 when token j is trained on as a target
  // (mask[0] belongs to no target). Safe to call from many threads.
  virtual void get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const = 0;
};

}  // namespace mh::data
