// GPT-2's byte-level BPE, loaded from the usual vocab.json (symbol -> id) and
// merges.txt (one merge "a b" per line, best first). Text is cut by the GPT-2
// pre-tokenizer, each piece's bytes become printable symbols through GPT-2's
// byte-to-unicode table, and adjacent symbols are merged lowest rank first.
// "<|endoftext|>" must be in the vocabulary: it is the end of document. It is
// not recognised inside text: encode treats it as ordinary characters.
#pragma once

#include <unordered_map>

#include "data/gpt2_pretokenizer.hpp"
#include "data/tokenizer.hpp"

namespace mh::data {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t eod_id() const override { return eod_; }

 private:
  void load_vocab(const std::string& vocab_file);
  void load_merges(const std::string& merges_file);
  // The BPE symbols of one pre-tokenised piece, after all merges.
  std::vector<std::string> merge(std::string_view piece) const;
  int32_t merge_rank(const std::string& left, const std::string& right) const;

  Gpt2Pretokenizer pretokenizer_;
  std::unordered_map<std::string, int32_t> ids_;          // symbol -> id
  std::vector<std::string> token_bytes_;                  // id -> the text bytes it stands for
  std::unordered_map<std::string, int32_t> merge_ranks_;  // "left right" -> line order
  std::string vocab_file_;
  int32_t eod_ = -1;
};

}  // namespace mh::data
