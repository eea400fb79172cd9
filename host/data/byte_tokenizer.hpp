// The byte-level tokenizer: every UTF-8 byte is its own token (ids 0..255) and
// id 256 is the end of document, so the vocabulary has 257 entries. It needs
// no files, which makes it the tokenizer of the embedded default model.
#pragma once

#include "data/tokenizer.hpp"

namespace mh::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;

  std::vector<int32_t> encode(std::string_view text) const override;
  // EOD decodes to "<|endoftext|>", as it does with the GPT-2 tokenizer.
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return kEod + 1; }
  int32_t eod_id() const override { return kEod; }
};

}  // namespace mh::data
