#include "data/text_input.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

namespace mh::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::vector<std::string> documents(const std::string& path, const std::string& key = "text") {
  std::vector<std::string> out;
  for_each_document(path, key, [&](std::string_view text) { out.emplace_back(text); });
  return out;
}

TEST(TextInput, TxtDocumentsAreSeparatedByBlankLines) {
  testing::TempDir dir;
  std::string path =
      dir.write("in.txt", "\n\nfirst line\nsecond line\n\n \t\n\nnext\r\ndoc\r\n\nlast");
  EXPECT_THAT(documents(path), ElementsAre("first line\nsecond line", "next\ndoc", "last"));
}

TEST(TextInput, JsonlTakesTheTextUnderTheKey) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl",
                               "{\"body\": \"a\\nb\", \"id\": 1}\n\n{\"body\": \"\"}\n"
                               "{\"body\": \"caf\\u00e9\"}\n");
  EXPECT_THAT(documents(path, "body"), ElementsAre("a\nb", "caf\xC3\xA9"));
}

TEST(TextInput, JsonlWithoutTheKeyNamesTheLine) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  EXPECT_THAT([&] { documents(path); },
              ThrowsMessage<Error>(HasSubstr("in.jsonl:2: no string under key \"text\"")));
}

TEST(TextInput, MalformedJsonNamesTheLine) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"a\"}\n{\"text\": \n");
  EXPECT_THAT([&] { documents(path); }, ThrowsMessage<Error>(HasSubstr("in.jsonl:2: not a JSON")));
}

TEST(TextInput, ErrorsWhileHandlingADocumentNameWhereItStarts) {
  testing::TempDir dir;
  std::string path = dir.write("in.txt", "ok\n\nbad\ntext\n");
  auto reject_bad = [](std::string_view text) { require(!text.starts_with("bad"), "rejected"); };
  EXPECT_THAT([&] { for_each_document(path, "text", reject_bad); },
              ThrowsMessage<Error>(HasSubstr("in.txt:3: rejected")));
}

TEST(TextInput, OtherExtensionsAreRefused) {
  testing::TempDir dir;
  std::string path = dir.write("in.csv", "a");
  EXPECT_THAT([&] { documents(path); }, ThrowsMessage<Error>(HasSubstr("name it .txt")));
}

}  // namespace
}  // namespace mh::data
