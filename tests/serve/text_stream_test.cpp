#include "serve/text_stream.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string_view>

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

// SentencePiece's decoding: "▁" is a space, the text's first one dropped;
// <0xNN> pieces are bytes, an incomplete character U+FFFD per byte.
class MetaspaceTokenizer final : public data::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view) const override { return {}; }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (int32_t id : ids) bytes += kPieces[size_t(id)];
    std::string text;
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes.compare(i, 3, "\u2581") == 0) {
        if (!(text.empty() && i == 0)) text += ' ';
        i += 2;
      } else {
        text += bytes[i];
      }
    const size_t whole = data::whole_characters(text);
    std::string out = text.substr(0, whole);
    for (size_t i = whole; i < text.size(); ++i) out += "\uFFFD";
    return out;
  }
  int32_t vocab_size() const override { return int32_t(kPieces.size()); }
  int32_t eod_id() const override { return 0; }

  static constexpr std::array<std::string_view, 6> kPieces = {"", "\u2581the", "\u2581lazy", "\xE4", "\xB8\xAD",
                                                             "\u2581dog"};
};

TEST(TokenTexts, JoinToTheCompletionWithItsSpaces) {
  MetaspaceTokenizer tokenizer;
  const int32_t prompt[] = {1}, completion[] = {2, 3, 4, 5};
  // Alone, "▁lazy" decodes as "lazy"; after the prompt it is " lazy". The
  // byte that begins 中 has no text: the character goes to the token that ends it.
  EXPECT_EQ(token_texts(tokenizer, prompt, completion),
            (std::vector<std::string>{" lazy", "", "\u4e2d", " dog"}));
  EXPECT_EQ(data::decode_continuation(tokenizer, prompt, completion), " lazy\u4e2d dog");
  // Without a context the text's first space is dropped, as decoding drops it.
  EXPECT_EQ(token_texts(tokenizer, {}, completion), (std::vector<std::string>{"lazy", "", "\u4e2d", " dog"}));
  // The last token takes what is left, an unfinished character too.
  const int32_t cut[] = {2, 3};
  EXPECT_EQ(token_texts(tokenizer, prompt, cut), (std::vector<std::string>{" lazy", "\uFFFD"}));
}

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
