#include "data/byte_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

namespace mh::data {
namespace {

using ::testing::HasSubstr;

TEST(ByteTokenizer, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  ByteTokenizer tokenizer;
  std::vector<int32_t> ids = tokenizer.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tokenizer.decode(ids), all);
}

TEST(ByteTokenizer, Utf8TextIsItsBytes) {
  ByteTokenizer tokenizer;
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x99\x82\n";
  EXPECT_EQ(tokenizer.encode(text),
            (std::vector<int32_t>{'c', 'a', 'f', 0xC3, 0xA9, ' ', 0xF0, 0x9F, 0x99, 0x82, '\n'}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

TEST(ByteTokenizer, VocabularyIs256BytesPlusEod) {
  ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 257);
  EXPECT_EQ(tokenizer.eod_id(), 256);
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{'a', 256, 'b'}), "a<|endoftext|>b");
}

TEST(ByteTokenizer, DecodingAnIdOutsideTheVocabularyIsAnError) {
  ByteTokenizer tokenizer;
  EXPECT_THAT([&] { tokenizer.decode(std::vector<int32_t>{257}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot decode token id 257")));
  EXPECT_THROW(tokenizer.decode(std::vector<int32_t>{-1}), Error);
}

TEST(MakeTokenizer, ByNameOrAClearError) {
  EXPECT_EQ(make_tokenizer("byte", {})->vocab_size(), 257);
  EXPECT_THAT([] { make_tokenizer("wordpiece", {}); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("choose \"byte\", \"gpt2\", \"huggingface\" or \"sentencepiece\"")));
}

}  // namespace
}  // namespace mh::data
