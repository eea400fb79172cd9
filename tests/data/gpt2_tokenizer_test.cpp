#include "data/gpt2_tokenizer.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

namespace mh::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Symbols are GPT-2's stand-ins for bytes: space is "Ġ" (U+0120), newline "Ċ"
// (U+010A), the bytes C3 A9 of "é" are "Ã" and "©", and byte 0xAD is "Ń".
constexpr char kVocab[] = R"({
  "<|endoftext|>": 0, "\u0120": 1, "\u010a": 2, "t": 3, "h": 4, "e": 5, "a": 6, "I": 7,
  "'": 8, "m": 9, "\u00c3": 10, "\u00a9": 11, "\u0143": 12,
  "he": 13, "\u0120t": 14, "\u0120the": 15, "'m": 16, "aa": 17
})";
constexpr char kMerges[] = "#version: 0.2\nh e\n\u0120 t\n\u0120t he\n' m\na a\n";

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  Gpt2Tokenizer load(const std::string& vocab = kVocab, const std::string& merges = kMerges) {
    return Gpt2Tokenizer(dir_.write("vocab.json", vocab), dir_.write("merges.txt", merges));
  }
  testing::TempDir dir_;
};

TEST_F(Gpt2TokenizerTest, MergesLowestRankFirstWithinAPiece) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_THAT(tokenizer.encode(" the"), ElementsAre(15));
  EXPECT_THAT(tokenizer.encode("the"), ElementsAre(3, 13));  // no "t he" merge
}

TEST_F(Gpt2TokenizerTest, MergesEveryOccurrenceOfAPairLeftToRight) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_THAT(tokenizer.encode("aaa"), ElementsAre(17, 6));
  EXPECT_THAT(tokenizer.encode("aaaa"), ElementsAre(17, 17));
}

TEST_F(Gpt2TokenizerTest, ContractionsAreTheirOwnPieces) {
  EXPECT_THAT(load().encode("I'm"), ElementsAre(7, 16));
}

TEST_F(Gpt2TokenizerTest, NonAsciiBytesUseTheirStandIns) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_THAT(tokenizer.encode("\xC3\xA9"), ElementsAre(10, 11));
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{10, 11}), "\xC3\xA9");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{12}), "\xAD");
}

TEST_F(Gpt2TokenizerTest, DecodeInvertsEncode) {
  Gpt2Tokenizer tokenizer = load();
  const std::string text = "I'm the\n\n aa \xC3\xA9 heat";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

TEST_F(Gpt2TokenizerTest, EndOfTextIsTheEod) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_EQ(tokenizer.eod_id(), 0);
  EXPECT_EQ(tokenizer.vocab_size(), 18);
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{0}), "<|endoftext|>");
}

TEST_F(Gpt2TokenizerTest, ASymbolMissingFromTheVocabularyIsAnError) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_THAT([&] { tokenizer.encode("z"); },
              ThrowsMessage<Error>(HasSubstr("symbol 'z' is not in")));
}

TEST_F(Gpt2TokenizerTest, InvalidUtf8NamesTheByte) {
  Gpt2Tokenizer tokenizer = load();
  EXPECT_THAT([&] { tokenizer.encode("he\xFFte"); },
              ThrowsMessage<Error>(HasSubstr("not valid UTF-8 at byte 2")));
}

TEST_F(Gpt2TokenizerTest, VocabularyWithoutEndOfTextIsAnError) {
  EXPECT_THAT([&] { load(R"({"a": 0})"); },
              ThrowsMessage<Error>(HasSubstr("has no <|endoftext|>")));
}

TEST_F(Gpt2TokenizerTest, RepeatedIdsInTheVocabularyAreAnError) {
  EXPECT_THAT([&] { load(R"({"<|endoftext|>": 0, "a": 0})"); },
              ThrowsMessage<Error>(HasSubstr("each used once")));
}

TEST_F(Gpt2TokenizerTest, MalformedMergeLineNamesFileAndLine) {
  EXPECT_THAT([&] { load(kVocab, "#version: 0.2\nh e\nabc\n"); },
              ThrowsMessage<Error>(HasSubstr("merges.txt:3: expected two symbols")));
}

TEST_F(Gpt2TokenizerTest, MissingFilesNameTheFlag) {
  EXPECT_THAT([&] { Gpt2Tokenizer(dir_.file("none.json"), dir_.file("none.txt")); },
              ThrowsMessage<Error>(HasSubstr("pass its path with --vocab_file")));
}

TEST(Gpt2Pretokenizer, SplitsContractionsWordsAndWhitespaceLikeGpt2) {
  Pretokenizer pretokenizer(kGpt2Pattern);
  // A whitespace run leaves its last character to the piece after it, even a
  // newline that then stands alone before a word.
  EXPECT_THAT(pretokenizer.split("I'm here  now\n\nok"),
              ElementsAre("I", "'m", " here", " ", " now", "\n", "\n", "ok"));
}

TEST(Gpt2Pretokenizer, SplitsNumbersFromPunctuation) {
  EXPECT_THAT(Pretokenizer(kGpt2Pattern).split("x 123 4.5!!"),
              ElementsAre("x", " 123", " 4", ".", "5", "!!"));
}

TEST(Gpt2Pretokenizer, UnicodeLettersFormWords) {
  EXPECT_THAT(Pretokenizer(kGpt2Pattern).split("\xE6\x9D\xB1\xE4\xBA\xAC caf\xC3\xA9 end   "),
              ElementsAre("\xE6\x9D\xB1\xE4\xBA\xAC", " caf\xC3\xA9", " end", "   "));
}

}  // namespace
}  // namespace mh::data
