// Blending several datasets as Megatron does (--data-path 0.3 a 0.7 b): a
// weighted list of dataset prefixes, and a sample source that takes global
// sample i from the dataset whose share so far lags its weight the most
// (Megatron's build_blending_indices), so the mix matches the weights at
// every prefix of the order and depends only on the weights and i.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/samples.hpp"

namespace mh::data {

struct BlendEntry {
  double weight;
  std::string prefix;
};

// "PREFIX" alone (weight 1) or "W1 PREFIX1 W2 PREFIX2 ...", separated by
// spaces or commas. Throws mh::Error naming `key`, the text and the fix.
std::vector<BlendEntry> parse_blend(std::string_view text, std::string_view key);

class BlendedSamples final : public Samples {
 public:
  // weights need not sum to 1; they are normalised.
  BlendedSamples(std::vector<std::unique_ptr<Samples>> parts, std::vector<double> weights);

  // The parts' sizes added up.
  int64_t size() const override;
  void get(int64_t index, int32_t* out) const override;
  bool masks_loss() const override;
  void get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const override;

  // Which part global sample `index` comes from, and its index there.
  struct Source {
    size_t part;
    int64_t index;
  };
  Source source(int64_t index) const;

 private:
  std::vector<int64_t> counts_at_block(int64_t block) const;

  std::vector<std::unique_ptr<Samples>> parts_;
  std::vector<double> weights_;
  // counts_[b][d]: samples taken from part d before sample b * kBlock,
  // extended on demand.
  mutable std::mutex mu_;
  mutable std::vector<std::vector<int64_t>> counts_;
};

// The parts one after another, each for one epoch: validation over a whole
// split visits every window of every dataset once.
class ConcatenatedSamples final : public Samples {
 public:
  explicit ConcatenatedSamples(std::vector<std::unique_ptr<Samples>> parts);
  int64_t size() const override { return size_; }
  void get(int64_t index, int32_t* out) const override;
  bool masks_loss() const override;
  void get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const override;

 private:
  // The part global sample `index` comes from, and its index there.
  std::pair<const Samples*, int64_t> source(int64_t index) const;

  std::vector<std::unique_ptr<Samples>> parts_;
  int64_t size_ = 0;
};

}  // namespace mh::data
