// A byte-level BPE tokenizer: special tokens are cut out of the text first,
// the rest is pre-tokenised by a regex (pretokenizer.hpp) and each piece
// encoded by byte-level BPE (byte_level_bpe.hpp). GPT-2's files
// (gpt2_tokenizer.hpp) and Hugging Face tokenizer.json files
// (hf_tokenizer.hpp) both load into one.
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/byte_level_bpe.hpp"
#include "data/pretokenizer.hpp"
#include "data/tokenizer.hpp"

namespace mh::data {

struct BpeParts {
  std::string source;  // the file(s), for messages
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // best first
  std::string pattern = kGpt2Pattern;
  bool add_prefix_space = false;  // a space before every text that lacks one
  bool ignore_merges = false;
  // Tokens recognised in the text as themselves, before pre-tokenisation.
  std::vector<std::pair<std::string, int32_t>> special_tokens;
  int32_t eod = -1;
};

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(const BpeParts& parts);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eod_id() const override { return eod_; }

 private:
  void encode_text(std::string_view text, std::vector<int32_t>& ids) const;

  std::string source_;
  Pretokenizer pretokenizer_;
  ByteLevelBpe bpe_;
  bool add_prefix_space_;
  std::vector<std::pair<std::string, int32_t>> special_tokens_;  // longest first
  std::unordered_map<int32_t, std::string> special_text_;
  std::array<bool, 256> special_first_byte_{};  // bytes a special token starts with
  int32_t vocab_size_;
  int32_t eod_;
};

}  // namespace mh::data
