#include "data/sentencepiece_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>
#include <sentencepiece_trainer.h>

#include "data/sft_input.hpp"
#include "data/tokenizer.hpp"
#include "temp_dir.hpp"

namespace mh::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A BPE model with byte fallback trained on a few lines, as Llama 2's was
// (<unk> 0, <s> 1, </s> 2, then the 256 byte pieces).
std::string train(const testing::TempDir& dir) {
  std::string lines;
  for (int i = 0; i < 50; ++i) lines += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  const std::string input = dir.write("lines.txt", lines);
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + input + " --model_prefix=" + dir.file("tokenizer") +
      " --vocab_size=300 --model_type=bpe --byte_fallback=true --normalization_rule_name=identity"
      " --remove_extra_whitespaces=false --minloglevel=2");
  EXPECT_TRUE(status.ok()) << status.ToString();
  return dir.file("tokenizer.model");
}

std::unique_ptr<Tokenizer> load(const std::string& model) {
  TokenizerFiles files;
  files.tokenizer_file = model;
  return make_tokenizer("sentencepiece", files);
}

TEST(SentencePieceTokenizer, EncodesWithoutBosAndEndsDocumentsWithEos) {
  testing::TempDir dir;
  const auto tokenizer = load(train(dir));
  EXPECT_EQ(tokenizer->eod_id(), 2);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->vocab_size(), 300);
  const std::vector<int32_t> ids = tokenizer->encode("the lazy fox");
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(tokenizer->decode(ids), "the lazy fox");
}

TEST(SentencePieceTokenizer, CharactersOutsideTheVocabularyRoundTripAsBytes) {
  testing::TempDir dir;
  const auto tokenizer = load(train(dir));
  const std::string text = "fox \u4e2d\u6587 \U0001F600";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(text)), text);
}

TEST(SentencePieceTokenizer, AnIncompleteCharacterDecodesAsReplacementCharacters) {
  testing::TempDir dir;
  const auto tokenizer = load(train(dir));
  std::vector<int32_t> ids = tokenizer->encode("\u4e2d");  // "▁" then three byte pieces
  ASSERT_EQ(ids.size(), 4u);
  ids.pop_back();
  EXPECT_EQ(tokenizer->decode(ids), "\uFFFD\uFFFD");
}

TEST(SentencePieceTokenizer, AContinuationKeepsTheSpaceItsFirstPieceBegins) {
  testing::TempDir dir;
  const auto tokenizer = load_sentencepiece_model(train(dir));
  const std::vector<int32_t> ids = tokenizer->encode("the lazy dog");
  // The completion begins at the piece of the second word, "▁l...".
  size_t k = 1;
  while (k < ids.size() && !tokenizer->piece(ids[k]).starts_with("\u2581")) ++k;
  ASSERT_LT(k, ids.size());
  const std::span<const int32_t> prompt(ids.data(), k), completion(ids.data() + k, ids.size() - k);
  EXPECT_EQ(tokenizer->decode(prompt), "the");
  EXPECT_EQ(tokenizer->decode(completion), "lazy dog");
  EXPECT_EQ(decode_continuation(*tokenizer, prompt, completion), " lazy dog");
}

// Logprobs' token texts: each what decoding through it adds, so a "▁" piece
// keeps its space and the texts join to the completion; the byte pieces of a
// character have "" until the last, which has the character.
TEST(SentencePieceTokenizer, TokenTextsJoinToTheCompletionWithItsSpaces) {
  testing::TempDir dir;
  const auto tokenizer = load_sentencepiece_model(train(dir));
  const std::vector<int32_t> ids = tokenizer->encode("the lazy dog \u4e2d");
  ASSERT_EQ(tokenizer->piece(ids[0]), "\u2581the");
  const std::span<const int32_t> prompt(ids.data(), 1), completion(ids.data() + 1, ids.size() - 1);
  const std::vector<std::string> texts = token_texts(*tokenizer, prompt, completion);
  ASSERT_EQ(texts.size(), completion.size());
  std::string joined;
  for (size_t k = 0; k < texts.size(); ++k) {
    joined += texts[k];
    if (tokenizer->piece(completion[k]).starts_with("\u2581")) EXPECT_TRUE(texts[k].starts_with(" ")) << k;
  }
  EXPECT_EQ(joined, " lazy dog \u4e2d");
  EXPECT_EQ(std::vector<std::string>(texts.end() - 3, texts.end()), (std::vector<std::string>{"", "", "\u4e2d"}));
  // Without a context the text's first space is dropped, as decoding drops it.
  EXPECT_EQ(token_texts(*tokenizer, {}, ids).front(), "the");
}

// SFT segments are tokenized as one text: no "▁" of their own, and the mask
// takes the tokens that hold trained text, those straddling a boundary too.
TEST(SentencePieceTokenizer, SftSegmentsAreTheWholeTextsTokens) {
  testing::TempDir dir;
  const auto tokenizer = load_sentencepiece_model(train(dir));
  const auto mask_of = [&](const std::vector<SftSegment>& segments) {
    std::string text;
    for (const SftSegment& s : segments) text += s.text;
    const SftTokens t = tokenize_segments(segments, *tokenizer);
    EXPECT_EQ(t.ids, tokenizer->encode(text));
    std::string shown;  // the pieces, trained ones in []
    for (size_t i = 0; i < t.ids.size(); ++i) {
      const std::string piece = tokenizer->piece(t.ids[i]);
      shown += t.mask[i] ? "[" + piece + "]" : piece;
    }
    return shown;
  };
  const std::string m = "\u2581";
  std::vector<int32_t> apart = tokenizer->encode("the");  // each segment with its own dummy prefix
  for (int32_t id : tokenizer->encode(" lazy dog")) apart.push_back(id);
  EXPECT_NE(apart, tokenizer->encode("the lazy dog"));
  // (This small model has "▁the" but spells "lazy" and "dog" in short pieces.)
  EXPECT_EQ(mask_of({{"the", false}, {" lazy dog", true}}), m + "the[" + m + "][l][az][y][" + m + "][d][o][g]");
  // The prompt's space goes with the completion's first word: trained on.
  EXPECT_EQ(mask_of({{"lazy ", false}, {"the", true}, {" dog", false}}), m + "lazy[" + m + "the]" + m + "dog");
  // A trained character of byte pieces: all its bytes.
  EXPECT_EQ(mask_of({{"the", false}, {"\u4e2d", true}}), m + "the[<0xE4>][<0xB8>][<0xAD>]");
}

TEST(SentencePieceTokenizer, AnIdOutsideTheVocabularyIsRefused) {
  testing::TempDir dir;
  const auto tokenizer = load(train(dir));
  const std::vector<int32_t> ids{300};
  EXPECT_THAT([&] { tokenizer->decode(ids); }, ThrowsMessage<Error>(HasSubstr("cannot decode token id 300")));
}

TEST(SentencePieceTokenizer, AFileThatIsNoModelIsRefusedNamingIt) {
  testing::TempDir dir;
  const std::string bad = dir.write("tokenizer.model", "{\"model\": \"not a protobuf\"}");
  EXPECT_THAT([&] { load(bad); },
              ThrowsMessage<Error>(AllOf(HasSubstr(bad), HasSubstr("not a SentencePiece model"))));
}

TEST(SentencePieceTokenizer, AMissingFileIsRefusedNamingIt) {
  testing::TempDir dir;
  EXPECT_THAT([&] { load(dir.file("gone.model")); }, ThrowsMessage<Error>(HasSubstr(dir.file("gone.model"))));
}

TEST(SentencePieceTokenizer, NeedsItsModelFile) {
  EXPECT_THAT([] { make_tokenizer("sentencepiece", {}); },
              ThrowsMessage<Error>(HasSubstr("give data.tokenizer_file")));
}

}  // namespace
}  // namespace mh::data
