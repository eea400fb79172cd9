#include "data/gpt_samples.hpp"

#include "data/permutation.hpp"

#include <megahost/error.hpp>
#include <megahost/rng.hpp>

#include <algorithm>
#include <vector>

namespace mh::data {

GptSamples::GptSamples(const IndexedDataset& dataset, Split split, std::string_view split_weights,
                       int64_t seq_len, uint64_t seed, const IndexedDataset* loss_mask, int32_t eod_mask_id)
    : dataset_(dataset),
      loss_mask_(loss_mask),
      eod_mask_id_(eod_mask_id),
      seq_len_(seq_len),
      key_(rng::splitmix64(rng::splitmix64(seed) ^ static_cast<uint64_t>(split))) {
  require(seq_len > 0, "GptSamples: seq_len must be positive, got " + std::to_string(seq_len));
  DocumentRange documents = split_documents(split_weights, split, dataset.document_count());
  first_sequence_ = dataset.document_begin(documents.begin);
  const int64_t end_sequence = dataset.document_begin(documents.end);
  starts_.reserve(end_sequence - first_sequence_ + 1);
  starts_.push_back(0);
  for (int64_t s = first_sequence_; s < end_sequence; ++s) {
    starts_.push_back(starts_.back() + dataset.sequence_length(s));
  }
  const int64_t tokens = starts_.back();
  require(tokens >= seq_len + 1,
          "the " + std::string(split_name(split)) + " split of " + dataset.prefix() +
              " (documents " + std::to_string(documents.begin) + ".." +
              std::to_string(documents.end) + " of " + std::to_string(dataset.document_count()) +
              " under split \"" + std::string(split_weights) + "\") has " + std::to_string(tokens) +
              " tokens, but one sample of seq_len " + std::to_string(seq_len) + " needs " +
              std::to_string(seq_len + 1) +
              "; lower seq_len, give this split more weight, or use more data");
  windows_ = (tokens - 1) / seq_len;
}

int64_t GptSamples::window(int64_t index) const {
  if (index < 0) {
    throw Error(MH_INVALID_ARGUMENT,
                "GptSamples::get: negative sample index " + std::to_string(index));
  }
  const auto epoch = static_cast<uint64_t>(index / windows_);
  const Permutation order(static_cast<uint64_t>(windows_), rng::splitmix64(key_ ^ rng::splitmix64(epoch)));
  return static_cast<int64_t>(order(static_cast<uint64_t>(index % windows_)));
}

void GptSamples::get(int64_t index, int32_t* out) const {
  read_stream(dataset_, window(index) * seq_len_, seq_len_ + 1, out);
}

void GptSamples::get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const {
  const size_t n = static_cast<size_t>(seq_len_ + 1);
  if (loss_mask_ != nullptr) {
    std::vector<int32_t> bytes(n);
    read_stream(*loss_mask_, window(index) * seq_len_, seq_len_ + 1, bytes.data());
    std::copy(bytes.begin(), bytes.end(), mask);
  } else {
    std::fill(mask, mask + n, uint8_t{1});
  }
  // Megatron's --eod-mask-loss: no loss where the input is the EOD, i.e. on
  // the first token of the next document.
  if (eod_mask_id_ >= 0)
    for (size_t t = 0; t + 1 < n; ++t)
      if (tokens[t] == eod_mask_id_) mask[t + 1] = 0;
}

// Copies tokens [position, position + count) of the split's stream, which may
// span several sequences.
void GptSamples::read_stream(const IndexedDataset& from, int64_t position, int64_t count, int32_t* out) const {
  // The last sequence starting at or before position holds it; empty
  // sequences share their start with the next and are skipped by this.
  auto s = std::upper_bound(starts_.begin(), starts_.end(), position) - starts_.begin() - 1;
  while (count > 0) {
    const int64_t offset = position - starts_[s];
    const int64_t take = std::min(count, starts_[s + 1] - position);
    from.read(first_sequence_ + s, offset, take, out);
    out += take;
    position += take;
    count -= take;
    ++s;
  }
}

}  // namespace mh::data
