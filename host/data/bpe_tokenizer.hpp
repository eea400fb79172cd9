// A BPE tokenizer: special tokens are cut out of the text first, the rest is
// pre-tokenised by a regex (pretokenizer.hpp) and each piece encoded by
// byte-level BPE (byte_level_bpe.hpp). GPT-2's files (gpt2_tokenizer.hpp) and
// Hugging Face tokenizer.json files (hf_tokenizer.hpp) both load into one.
//
// A SentencePiece BPE model converted to a tokenizer.json (Llama 2,
// Mistral: `metaspace` set) runs on characters instead: spaces become "▁"
// (with one "▁" put before the text), the text is cut before each "▁" or not
// at all, and the pieces are merged over characters with byte fallback;
// decoding turns "▁" back into spaces, <0xNN> runs back into the bytes they
// spell (U+FFFD for each byte of a run that is not UTF-8) and drops the first
// space, as `tokenizers`' Replace, ByteFallback, Fuse and Strip decoders do.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/byte_level_bpe.hpp"
#include "data/pretokenizer.hpp"
#include "data/tokenizer.hpp"

namespace mh::data {

// How a tokenizer.json of SentencePiece's layout puts in its "▁".
struct Metaspace {
  enum class Prepend {
    kEverySegment,  // the Llama 2 normalizer: Prepend("▁") then Replace(" ", "▁")
    kFirst,         // Metaspace, prepend_scheme "first": only before the text's start
    kAlways,        // Metaspace, prepend_scheme "always": before every segment
    kNever,         // Metaspace, prepend_scheme "never"
  };
  Prepend prepend = Prepend::kEverySegment;
  bool split = false;        // cut the text before each "▁"
  bool strip_space = true;   // decoding drops one leading space (the Strip decoder)
  int32_t unk = -1;          // model.unk_token's id; -1: none
};

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
  std::optional<Metaspace> metaspace;  // set: SentencePiece's layout, not byte-level
};

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(const BpeParts& parts);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eod_id() const override { return eod_; }

 private:
  // A stretch of text between special tokens; `at_start`: it begins the text.
  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  void encode_metaspace(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  std::string decode_metaspace(std::span<const int32_t> ids) const;
  const std::string& token_text(int32_t id) const;

  std::string source_;
  Pretokenizer pretokenizer_;
  ByteLevelBpe bpe_;
  bool add_prefix_space_;
  std::optional<Metaspace> metaspace_;
  std::vector<std::pair<std::string, int32_t>> special_tokens_;  // longest first
  std::unordered_map<int32_t, std::string> special_text_;
  std::array<bool, 256> special_first_byte_{};  // bytes a special token starts with
  int32_t vocab_size_;
  int32_t eod_;
};

}  // namespace mh::data
