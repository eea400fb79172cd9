#include "serve/text_stream.hpp"

#include <algorithm>
#include <string_view>

namespace mh::serve {

bool TextStream::add(int32_t token) {
  tokens_.push_back(token);
  text_ = data::decode_continuation(*tokenizer_, prompt_, tokens_);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text_.find(s));
  if (cut != std::string::npos) {
    shown_ = text_.substr(0, cut);
    return true;
  }
  const size_t whole = data::whole_characters(text_);
  size_t safe = whole;
  // Hold back the longest tail that begins a stop sequence.
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, whole); k > 0; --k)
      if (text_.compare(whole - k, k, s, 0, k) == 0) {
        safe = std::min(safe, whole - k);
        break;
      }
  if (safe > shown_.size()) shown_ = text_.substr(0, safe);
  return false;
}

void TextStream::finish() { shown_ = text_; }

}  // namespace mh::serve
