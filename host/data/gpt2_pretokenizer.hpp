// GPT-2's pre-tokenisation: text is cut into pieces by the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (contractions, words, numbers and punctuation runs that keep one leading
// space, whitespace runs that leave their last space to the next word), and
// BPE merges never cross a piece boundary.
#pragma once

#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace mh::data {

class Gpt2Pretokenizer {
 public:
  Gpt2Pretokenizer();
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // The pieces, in order, as views into text. Throws mh::Error naming the
  // byte offset when text is not valid UTF-8.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  pcre2_real_code_8* code_;
};

}  // namespace mh::data
