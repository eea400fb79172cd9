// A choice's completion text as its tokens arrive: decoded whole, shown as
// far as it is final — no half of a UTF-8 character (a byte-level token may
// end inside one), no trailing U+FFFD (SentencePiece's byte fallback decodes
// the bytes of a character not yet complete as U+FFFD, which the next token
// may turn into the character), nothing that may begin a stop sequence —
// and cut before the first stop sequence, which ends the choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"

namespace mh::serve {

class TextStream {
 public:
  // `prompt`: the ids the completion continues (data::decode_continuation).
  TextStream(const data::Tokenizer& tokenizer, std::vector<std::string> stop, std::span<const int32_t> prompt)
      : tokenizer_(&tokenizer), stop_(std::move(stop)), prompt_(prompt.begin(), prompt.end()) {}

  // Adds a generated token; true when the text now holds a stop sequence.
  bool add(int32_t token);
  // The whole text, when the choice ends for another reason.
  void finish();
  const std::string& shown() const { return shown_; }

 private:
  const data::Tokenizer* tokenizer_;
  std::vector<std::string> stop_;
  std::vector<int32_t> prompt_, tokens_;
  std::string text_, shown_;
};

}  // namespace mh::serve
