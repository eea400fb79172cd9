#include "data/hf_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

namespace mh::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A byte-level BPE over "a", "b", " " (as "Ġ") with the merge "a b", GPT-2's
// pre-tokenizer, and one added token beyond the model's vocabulary.
nlohmann::json tiny() {
  return nlohmann::json::parse(R"({
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "added_tokens": [{"id": 4, "content": "<|end_of_text|>", "special": true,
                      "lstrip": false, "rstrip": false, "single_word": false}],
    "model": {"type": "BPE", "dropout": null, "vocab": {"a": 0, "b": 1, "\u0120": 2, "ab": 3},
              "merges": [["a", "b"]]}
  })");
}

BpeTokenizer load(const nlohmann::json& file) {
  return BpeTokenizer(parse_tokenizer_json("tokenizer.json", file.dump()));
}

TEST(HfTokenizer, EncodesByteLevelBpeAndCutsAddedTokensOutOfTheText) {
  BpeTokenizer tokenizer = load(tiny());
  EXPECT_THAT(tokenizer.encode("ab<|end_of_text|>b ab"), ElementsAre(3, 4, 1, 2, 3));
  EXPECT_EQ(tokenizer.vocab_size(), 5);
  EXPECT_EQ(tokenizer.eod_id(), 4);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("ab<|end_of_text|>b")), "ab<|end_of_text|>b");
}

TEST(HfTokenizer, MergesGivenAsStringsLoadToo) {
  nlohmann::json file = tiny();
  file["model"]["merges"] = {"a b"};
  EXPECT_THAT(load(file).encode("ab"), ElementsAre(3));
}

TEST(HfTokenizer, NormalizerIsRefusedNamingTheKey) {
  nlohmann::json file = tiny();
  file["normalizer"] = {{"type", "NFC"}};
  EXPECT_THAT([&] { load(file); },
              ThrowsMessage<Error>(AllOf(HasSubstr("tokenizer.json: normalizer:"), HasSubstr("NFC"))));
}

TEST(HfTokenizer, ModelOtherThanBpeIsRefused) {
  nlohmann::json file = tiny();
  file["model"]["type"] = "WordPiece";
  EXPECT_THAT([&] { load(file); }, ThrowsMessage<Error>(HasSubstr("model.type: \"WordPiece\" is not supported")));
}

// SentencePiece's layout (Llama 2): characters with byte fallback, "▁" for
// spaces, one put before the text, and Llama 2's decoder.
nlohmann::json tiny_metaspace() {
  return nlohmann::json::parse(R"({
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "added_tokens": [{"id": 2, "content": "</s>", "special": true, "normalized": false,
                      "lstrip": false, "rstrip": false, "single_word": false}],
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "\u2581": 4, "a": 5, "\u2581a": 6},
              "merges": [["\u2581", "a"]]}
  })");
}

TEST(HfTokenizer, SentencePieceLayoutMergesCharactersAndFallsBackToBytes) {
  BpeTokenizer tokenizer = load(tiny_metaspace());
  EXPECT_THAT(tokenizer.encode("a A"), ElementsAre(6, 4, 3));
  EXPECT_THAT(tokenizer.encode("B"), ElementsAre(4, 0));  // neither in the vocabulary nor its byte: unk
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("a A")), "a A");
  EXPECT_EQ(tokenizer.eod_id(), 2);
}

TEST(HfTokenizer, SentencePieceLayoutPrependsFirstOnlyAtTheStartOfTheText) {
  BpeTokenizer tokenizer = load(tiny_metaspace());
  EXPECT_THAT(tokenizer.encode("a</s>a"), ElementsAre(6, 2, 5));
}

TEST(HfTokenizer, SentencePieceLayoutWithAnotherDecoderIsRefused) {
  nlohmann::json file = tiny_metaspace();
  file["decoder"] = {{"type", "ByteLevel"}};
  EXPECT_THAT([&] { load(file); },
              ThrowsMessage<Error>(AllOf(HasSubstr("tokenizer.json: decoder:"), HasSubstr("ByteFallback"))));
}

TEST(HfTokenizer, UnicodePropertyBeyondLettersAndNumbersIsRefused) {
  nlohmann::json file = tiny();
  file["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{Lu}+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  EXPECT_THAT([&] { load(file); }, ThrowsMessage<Error>(HasSubstr("\\p{Lu} is not supported")));
}

TEST(HfTokenizer, WithoutAnEndOfDocumentTokenItIsAnError) {
  nlohmann::json file = tiny();
  file["added_tokens"] = nlohmann::json::array();
  EXPECT_THAT([&] { load(file); }, ThrowsMessage<Error>(HasSubstr("to end a document")));
}

TEST(HfTokenizer, AddedTokenFarBeyondTheVocabularyIsRefused) {
  nlohmann::json file = tiny();
  file["added_tokens"][0]["id"] = 1000000;
  EXPECT_THAT([&] { load(file); }, ThrowsMessage<Error>(HasSubstr("added_tokens[0]: expected {\"id\": 0..4")));
}

TEST(HfTokenizer, MergeOutsideTheVocabularyNamesTheMerge) {
  nlohmann::json file = tiny();
  file["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"b", "a"})});
  EXPECT_THAT([&] { load(file); }, ThrowsMessage<Error>(HasSubstr("merge 1 'b a' uses a symbol")));
}

TEST(Pretokenizer, ClassesAreTokenizersNotTheSystemLibrarys) {
  Pretokenizer gpt2(kGpt2Pattern);
  // U+180E is whitespace to PCRE2 10.42 but not to tokenizers (since Unicode
  // 6.3); U+31350 is a letter of CJK Extension H (Unicode 15).
  EXPECT_THAT(gpt2.split("a\xE1\xA0\x8E" "b"), ElementsAre("a", "\xE1\xA0\x8E", "b"));
  EXPECT_THAT(gpt2.split(" \xF0\xB1\x8D\x90\xF0\xB1\x8D\x90's"),
              ElementsAre(" \xF0\xB1\x8D\x90\xF0\xB1\x8D\x90", "'s"));
}

TEST(Pretokenizer, PatternThatBacktracksPastTheLimitIsBlamedNotTheText) {
  Pretokenizer pretokenizer("(a|aa)+$");
  EXPECT_THAT([&] { pretokenizer.split(std::string(60, 'a') + "!"); },
              ThrowsMessage<Error>(HasSubstr("the pre-tokenizer pattern failed on this text")));
}

TEST(Pretokenizer, TextBetweenMatchesIsAPieceOfItsOwn) {
  EXPECT_THAT(Pretokenizer("[0-9]+").split("ab12cd3"), ElementsAre("ab", "12", "cd", "3"));
}

}  // namespace
}  // namespace mh::data
