#include "serve/text_stream.hpp"

#include <algorithm>
#include <string_view>

namespace mh::serve {

size_t whole_characters(const std::string& text) {
  size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = uint8_t(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (length > back) n -= back;
    break;
  }
  constexpr std::string_view kReplacement = "\uFFFD";
  while (n >= kReplacement.size() && std::string_view(text).substr(0, n).ends_with(kReplacement)) n -= kReplacement.size();
  return n;
}

bool TextStream::add(int32_t token) {
  tokens_.push_back(token);
  text_ = data::decode_continuation(*tokenizer_, prompt_, tokens_);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text_.find(s));
  if (cut != std::string::npos) {
    shown_ = text_.substr(0, cut);
    return true;
  }
  const size_t whole = whole_characters(text_);
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
