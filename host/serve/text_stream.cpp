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

std::vector<std::string> token_texts(const data::Tokenizer& tokenizer, std::span<const int32_t> context,
                                     std::span<const int32_t> ids) {
  std::vector<std::string> texts;
  texts.reserve(ids.size());
  size_t given = 0;  // bytes of the text handed to earlier tokens
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = data::decode_continuation(tokenizer, context, ids.first(i + 1));
    const size_t upto = i + 1 == ids.size() ? text.size() : data::whole_characters(text);
    texts.push_back(upto > given ? text.substr(given, upto - given) : std::string());
    given = std::max(given, upto);
  }
  return texts;
}

}  // namespace mh::serve
