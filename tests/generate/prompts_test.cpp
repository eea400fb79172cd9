#include "generate/prompts.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <filesystem>
#include <fstream>

namespace mh::generate {
namespace {

std::string file_with(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("megahost_prompts_" + std::to_string(getpid()) + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string error_of(const std::string& prompt, const std::string& file) {
  try {
    read_prompts(prompt, file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Prompts, OnePromptOrTheNonEmptyLinesOfATextFile) {
  EXPECT_EQ(read_prompts("Hello", ""), std::vector<std::string>{"Hello"});
  EXPECT_EQ(read_prompts("", file_with("a.txt", "one\r\n\ntwo\nthree")),
            (std::vector<std::string>{"one", "two", "three"}));
}

TEST(Prompts, JsonLinesCarryPromptsThatSpanLines) {
  EXPECT_EQ(read_prompts("", file_with("b.jsonl", "{\"prompt\": \"a\\nb\"}\n{\"prompt\": \"c\", \"id\": 2}\n")),
            (std::vector<std::string>{"a\nb", "c"}));
}

TEST(Prompts, BadFilesAreNamedWithTheirLineAndFix) {
  const std::string bad = file_with("c.jsonl", "{\"prompt\": \"ok\"}\n{\"text\": \"no prompt\"}\n");
  EXPECT_THAT(error_of("", bad), testing::HasSubstr(bad + ":2: each line of a .jsonl prompts file"));
  EXPECT_THAT(error_of("", file_with("d.jsonl", "{\"prompt\": \n")), testing::HasSubstr(":1"));
  EXPECT_THAT(error_of("", "/nonexistent/prompts.txt"), testing::HasSubstr("is not a readable file"));
  EXPECT_THAT(error_of("", file_with("e.txt", "\n\n")), testing::HasSubstr("holds no prompt"));
  EXPECT_THAT(error_of("", std::filesystem::temp_directory_path().string()), testing::HasSubstr("not a readable file"));
}

// An editor's line number: blank lines count (they were skipped, so the
// bad line 4 below was reported as line 2).
TEST(Prompts, ABadJsonlLineIsNumberedAsTheFileIsBlankLinesIncluded) {
  const std::string bad = file_with("f.jsonl", "{\"prompt\": \"ok\"}\n\n\r\n{\"prompt\": 3}\n");
  EXPECT_THAT(error_of("", bad), testing::HasSubstr(bad + ":4: each line of a .jsonl prompts file"));
}

}  // namespace
}  // namespace mh::generate
