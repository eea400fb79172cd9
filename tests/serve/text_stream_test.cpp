#include "serve/text_stream.hpp"

#include <gtest/gtest.h>

namespace mh::serve {
namespace {

// Ids are bytes; a trailing run of bytes that is no whole UTF-8 character
// decodes as one U+FFFD per byte, as SentencePiece's byte fallback does.
class ByteFallbackTokenizer final : public data::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override { return {text.begin(), text.end()}; }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text(ids.begin(), ids.end());
    const size_t whole = data::whole_characters(text);
    std::string out = text.substr(0, whole);
    for (size_t i = whole; i < text.size(); ++i) out += "\uFFFD";
    return out;
  }
  int32_t vocab_size() const override { return 256; }
  int32_t eod_id() const override { return 0; }
};

TEST(TextStream, HoldsBackTheReplacementCharactersOfAnIncompleteCharacter) {
  ByteFallbackTokenizer tokenizer;
  TextStream stream(tokenizer, {}, {});
  const std::string text = "a\u4e2d";  // 'a', then three bytes
  std::vector<std::string> shown;
  for (char c : text) {
    stream.add(static_cast<uint8_t>(c));
    shown.push_back(stream.shown());
  }
  EXPECT_EQ(shown, (std::vector<std::string>{"a", "a", "a", "a\u4e2d"}));
}

TEST(TextStream, ShowsTheReplacementCharactersThatEndTheChoice) {
  ByteFallbackTokenizer tokenizer;
  TextStream stream(tokenizer, {}, {});
  stream.add(0xE4);
  EXPECT_EQ(stream.shown(), "");
  stream.finish();
  EXPECT_EQ(stream.shown(), "\uFFFD");
}

TEST(WholeCharacters, StopsBeforeAnIncompleteCharacterAndTrailingReplacements) {
  EXPECT_EQ(data::whole_characters("ab\xE4\xB8"), 2u);
  EXPECT_EQ(data::whole_characters("ab\uFFFD\uFFFD"), 2u);
  EXPECT_EQ(data::whole_characters("a\uFFFDb"), 5u);
}

}  // namespace
}  // namespace mh::serve
