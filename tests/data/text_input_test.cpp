#include "data/text_input.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <filesystem>

namespace mh::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::ThrowsMessage;

std::vector<Document> documents(const std::string& path, std::vector<std::string> keys = {"text"}) {
  DocumentReader reader(path);
  std::vector<Document> out;
  for (Document d; reader.next(d);) {
    parse_document(d, keys, path);
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> texts(const std::string& path, std::vector<std::string> keys = {"text"}) {
  std::vector<std::string> out;
  for (const Document& d : documents(path, std::move(keys))) {
    EXPECT_THAT(d.problem, IsEmpty());
    out.insert(out.end(), d.texts.begin(), d.texts.end());
  }
  return out;
}

TEST(TextInput, TxtDocumentsAreSeparatedByBlankLines) {
  testing::TempDir dir;
  std::string path =
      dir.write("in.txt", "\n\nfirst line\nsecond line\n\n \t\n\nnext\r\ndoc\r\n\nlast");
  EXPECT_THAT(texts(path), ElementsAre("first line\nsecond line", "next\ndoc", "last"));
  EXPECT_EQ(documents(path)[1].line, 8);
}

TEST(TextInput, JsonlTakesTheTextUnderEachKey) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl",
                               "{\"body\": \"a\\nb\", \"title\": \"t\"}\n\n"
                               "{\"body\": \"caf\\u00e9\", \"title\": \"\"}\n");
  EXPECT_THAT(texts(path, {"body", "title"}), ElementsAre("a\nb", "t", "caf\xC3\xA9", ""));
}

TEST(TextInput, JsonlWithoutTheKeyNamesTheLine) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  EXPECT_THAT(documents(path)[1].problem, HasSubstr("in.jsonl:2: no string under key \"text\""));
}

TEST(TextInput, MalformedJsonNamesTheLine) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"a\"}\n{\"text\": \n");
  EXPECT_THAT(documents(path)[1].problem, HasSubstr("in.jsonl:2: not a JSON object"));
}

TEST(TextInput, InvalidUtf8InJsonlIsNamedAsSuchWithItsByte) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"ab\xFF\"}\n");
  EXPECT_THAT(documents(path)[0].problem, HasSubstr("in.jsonl:1: not valid UTF-8 at byte 12 of the line"));
}

TEST(TextInput, LoneSurrogateInJsonlIsNamedAsSuch) {
  testing::TempDir dir;
  std::string path = dir.write("in.jsonl", "{\"text\": \"a\\ud800b\"}\n");
  EXPECT_THAT(documents(path)[0].problem, HasSubstr("in.jsonl:1: a \\u escape is a lone UTF-16 surrogate"));
}

TEST(TextInput, Utf8CheckRefusesOverlongFormsSurrogatesAndPastTheLastCodePoint) {
  EXPECT_EQ(invalid_utf8_at("caf\xC3\xA9 \xF0\x9F\x99\x82"), -1);
  EXPECT_EQ(invalid_utf8_at("a\xC0\xAF"), 1);          // overlong '/'
  EXPECT_EQ(invalid_utf8_at("ab\xED\xA0\x80"), 2);     // U+D800
  EXPECT_EQ(invalid_utf8_at("\xF4\x90\x80\x80"), 0);   // U+110000
  EXPECT_EQ(invalid_utf8_at("abc\xE2\x82"), 3);        // cut short
}

TEST(TextInput, OtherExtensionsAreRefused) {
  testing::TempDir dir;
  std::string path = dir.write("in.csv", "a");
  EXPECT_THAT([&] { documents(path); }, ThrowsMessage<Error>(HasSubstr("name it .txt")));
}

// A directory opened as a stream and failed on its first read: "error while
// reading in.jsonl", not what it is.
TEST(TextInput, ADirectoryNamedLikeAJsonlFileIsRefusedByItsType) {
  testing::TempDir dir;
  const std::string path = dir.file("in.jsonl");
  std::filesystem::create_directory(path);
  EXPECT_THAT([&] { documents(path); },
              ThrowsMessage<Error>(HasSubstr(path + " is a directory, not a regular file")));
}

}  // namespace
}  // namespace mh::data
