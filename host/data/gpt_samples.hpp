// GPT training samples over one split of an indexed dataset, as Megatron's
// GPTDataset builds them: the split's documents are concatenated in file order
// into one token stream (each document already ends in EOD, appended by
// megahost_prepare), and sample w is the window of seq_len + 1 tokens starting
// at token w * seq_len, so consecutive windows share one token: the last
// target of one is the first input of the next. An epoch visits every window
// once, in an order shuffled from the seed, with a new order every epoch.
// A sample's loss mask is the same window of the dataset's loss mask (when
// it has one), less, with data.eod_mask_loss, the targets that follow an
// EOD (Megatron's --eod-mask-loss).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "data/samples.hpp"
#include "data/split.hpp"

namespace mh::data {

class GptSamples final : public Samples {
 public:
  // Keeps a reference to dataset and loss_mask (null: every token is
  // trained on), which must outlive it; eod_mask_id >= 0 masks the targets
  // after that id. Throws mh::Error when the split has fewer than
  // seq_len + 1 tokens.
  GptSamples(const IndexedDataset& dataset, Split split, std::string_view split_weights,
             int64_t seq_len, uint64_t seed, const IndexedDataset* loss_mask = nullptr, int32_t eod_mask_id = -1);

  // Samples per epoch.
  int64_t size() const override { return windows_; }
  // Writes the seq_len + 1 tokens of sample `index` to out; index >= size()
  // continues into later epochs. Holds no state: safe to call from many
  // threads at once.
  void get(int64_t index, int32_t* out) const override;
  bool masks_loss() const override { return loss_mask_ != nullptr || eod_mask_id_ >= 0; }
  void get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const override;

 private:
  // The window (its position in the stream, / seq_len) sample `index` reads.
  int64_t window(int64_t index) const;
  void read_stream(const IndexedDataset& from, int64_t position, int64_t count, int32_t* out) const;

  const IndexedDataset& dataset_;
  const IndexedDataset* loss_mask_;
  int32_t eod_mask_id_;
  int64_t seq_len_;
  uint64_t key_;
  int64_t first_sequence_;
  std::vector<int64_t> starts_;  // stream position of each sequence of the split, then the end
  int64_t windows_;
};

}  // namespace mh::data
