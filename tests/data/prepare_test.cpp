#include "data/prepare.hpp"

#include "data/byte_tokenizer.hpp"
#include "data/indexed_dataset.hpp"
#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include "support/files.hpp"

namespace mh::data {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class PrepareTest : public ::testing::Test {
 protected:
  PrepareReport run(const std::string& input, PrepareOptions o = {}) {
    o.input = input;
    if (o.output_prefix.empty()) o.output_prefix = dir_.file("out");
    return prepare(o, tokenizer_, {});
  }
  std::string jsonl(int documents) {
    std::string text;
    for (int d = 0; d < documents; ++d) {
      text += "{\"text\": \"document " + std::to_string(d) + "\", \"title\": \"t\"}\n";
    }
    return dir_.write("in.jsonl", text);
  }

  testing::TempDir dir_;
  ByteTokenizer tokenizer_;
};

TEST_F(PrepareTest, OutputIsTheSameForAnyNumberOfWorkers) {
  const std::string input = jsonl(10000);
  run(input, {.output_prefix = dir_.file("one")});
  run(input, {.output_prefix = dir_.file("four"), .workers = 4});
  for (const char* ext : {".bin", ".idx"}) {
    EXPECT_EQ(mh::test::file_bytes(dir_.file("one") + ext), mh::test::file_bytes(dir_.file("four") + ext)) << ext;
  }
}

TEST_F(PrepareTest, EachJsonKeyGetsItsOwnDataset) {
  PrepareReport report = run(jsonl(3), {.json_keys = {"text", "title"}});
  EXPECT_EQ(report.documents, 3);
  EXPECT_EQ(IndexedDataset(dir_.file("out_text")).document_count(), 3);
  EXPECT_EQ(IndexedDataset(dir_.file("out_title")).sequence_length(0), 2);  // "t" and EOD
}

TEST_F(PrepareTest, ABadDocumentStopsTheRunNamingItsLine) {
  const std::string input = dir_.write("in.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\\udc00\"}\n");
  EXPECT_THAT([&] { run(input); },
              ThrowsMessage<Error>(HasSubstr("in.jsonl:2: a \\u escape is a lone UTF-16 surrogate")));
}

TEST_F(PrepareTest, SkippedBadDocumentsAreCounted) {
  const std::string input = dir_.write("in.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\xFF\"}\n[1]\n{\"text\": \"b\"}\n");
  PrepareReport report = run(input, {.skip_bad_documents = true});
  EXPECT_EQ(report.documents, 2);
  EXPECT_EQ(report.skipped, 2);
  EXPECT_THAT(report.first_skipped, HasSubstr("in.jsonl:2: not valid UTF-8 at byte 10"));
}

TEST_F(PrepareTest, ARunThatFailsPartwayLeavesThePreviousDataset) {
  run(jsonl(5));
  const std::string before = mh::test::file_bytes(dir_.file("out.idx"));
  std::string text;
  for (int d = 0; d < 9000; ++d) text += "{\"text\": \"more\"}\n";
  const std::string input = dir_.write("in.jsonl", text + "not json\n");
  EXPECT_THROW(run(input), Error);
  EXPECT_EQ(mh::test::file_bytes(dir_.file("out.idx")), before);
  EXPECT_EQ(IndexedDataset(dir_.file("out")).document_count(), 5);
}

}  // namespace
}  // namespace mh::data
