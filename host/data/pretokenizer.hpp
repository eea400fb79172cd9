// Regex pre-tokenisation, as Hugging Face `tokenizers` does it (its Split
// with the Isolated behaviour, which is also how its ByteLevel pre-tokenizer
// applies GPT-2's pattern): text is cut into the pieces the pattern matches,
// and any text between two matches is a piece of its own. BPE merges never
// cross a piece boundary.
//
// PCRE2 runs the pattern, but \p{L}, \p{N}, \s and their negations are first
// replaced by explicit code point lists (unicode_classes.hpp), so the classes
// are `tokenizers`' for every code point whatever PCRE2 and Unicode version
// the machine has. \d, \w, \b and other Unicode properties are refused: their
// meaning would again come from the system library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace mh::data {

// GPT-2's pattern: contractions, words, numbers and punctuation runs that
// keep one leading space, whitespace runs that leave their last space to the
// next word.
inline constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Pretokenizer {
 public:
  // Throws mh::Error naming the pattern and what in it is not supported.
  explicit Pretokenizer(std::string_view pattern);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // The pieces, in order, as views into text. Throws mh::Error naming the
  // byte offset when text is not valid UTF-8.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  pcre2_real_code_8* code_;
};

// The pattern with the Unicode classes spelled out as code point lists;
// exposed for tests.
std::string expand_unicode_classes(std::string_view pattern);

}  // namespace mh::data
