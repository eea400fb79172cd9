#include "data/token_range.hpp"

#include "data/data_sources.hpp"
#include "data/indexed_dataset.hpp"
#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <filesystem>
#include <fstream>

namespace mh::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class TokenRangeTest : public ::testing::Test {
 protected:
  std::string write(TokenDType dtype, const std::vector<std::vector<int32_t>>& documents) {
    IndexedDatasetWriter writer(prefix_, dtype);
    for (const auto& document : documents) writer.add_document(document);
    writer.finish();
    return prefix_;
  }
  // Overwrites the first token of .bin with `id`, as a foreign writer might.
  void patch_first_int32(int32_t id) {
    std::fstream bin(prefix_ + ".bin", std::ios::binary | std::ios::in | std::ios::out);
    bin.write(reinterpret_cast<const char*>(&id), sizeof id);
  }

  testing::TempDir dir_;
  std::string prefix_ = dir_.file("tokens");
};

TEST_F(TokenRangeTest, PrepareStoresTheRangeBesideTheDataset) {
  write(TokenDType::kUint16, {{5, 300}, {7}});
  ASSERT_TRUE(std::filesystem::exists(prefix_ + ".range"));
  IndexedDataset dataset(prefix_);
  TokenRange range = dataset_token_range(dataset);
  EXPECT_EQ(range.tokens, 3);
  EXPECT_EQ(range.min, 5);
  EXPECT_EQ(range.max, 300);
}

TEST_F(TokenRangeTest, DatasetWithoutSidecarIsScannedOnceAndCached) {
  write(TokenDType::kUint16, {{5, 300}, {7}});
  std::filesystem::remove(prefix_ + ".range");
  IndexedDataset dataset(prefix_);
  EXPECT_EQ(dataset_token_range(dataset).max, 300);
  EXPECT_TRUE(std::filesystem::exists(prefix_ + ".range"));
}

TEST_F(TokenRangeTest, SidecarOfAnotherDatasetIsNotBelieved) {
  write(TokenDType::kUint16, {{5, 300}, {7}});
  std::filesystem::copy_file(prefix_ + ".range", dir_.file("old.range"));
  write(TokenDType::kUint16, {{5, 30000}});
  std::filesystem::copy_file(dir_.file("old.range"), prefix_ + ".range",
                             std::filesystem::copy_options::overwrite_existing);
  IndexedDataset dataset(prefix_);
  EXPECT_EQ(dataset_token_range(dataset).max, 30000);
}

// A rewrite of the same length and index keeps the stamp, so the stale
// sidecar is believed before step 1; the ids are checked as they are read.
TEST_F(TokenRangeTest, AStaleSidecarAfterASameLengthRewriteIsCaughtWhenTheIdsAreRead) {
  write(TokenDType::kUint16, {{5, 300}, {7}});
  std::filesystem::copy_file(prefix_ + ".range", dir_.file("old.range"));
  write(TokenDType::kUint16, {{5, 30000}, {7}});
  std::filesystem::copy_file(dir_.file("old.range"), prefix_ + ".range",
                             std::filesystem::copy_options::overwrite_existing);
  DataRequest request{{prefix_, "", "", "", "", "100,0,0"}, [](const std::string& p) { return p; }, 1, 1, true,
                      false, false, false, 1000, "model.vocab"};
  OpenedData data = open_data(request);
  ASSERT_EQ(dataset_token_range(*data.datasets[0]).max, 300);  // the stale sidecar
  std::vector<int32_t> sample(2);
  EXPECT_THAT([&] { for (int64_t i = 0; i < data.train->size(); ++i) data.train->get(i, sample.data()); },
              ThrowsMessage<Error>(AllOf(HasSubstr(prefix_ + ".bin: token 1 of sequence 0 is id 30000, outside 0..999"),
                                         HasSubstr("megahost_prepare"))));
}

// Found by fuzzing: a sidecar claiming ids past int32 made the refusal's
// "at least max + 1" overflow. No .bin holds such ids, so it is rescanned.
TEST_F(TokenRangeTest, ASidecarClaimingIdsNoDatasetCanHoldIsRescanned) {
  write(TokenDType::kUint16, {{5, 300}, {7}});
  std::ifstream in(prefix_ + ".range");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  text.replace(text.find("max 300"), 7, "max 9223372036854775807");
  std::ofstream(prefix_ + ".range", std::ios::trunc) << text;
  IndexedDataset dataset(prefix_);
  EXPECT_EQ(dataset_token_range(dataset).max, 300);
}

TEST_F(TokenRangeTest, IdsAtOrAboveTheVocabularyAreRefusedWithTheNumbers) {
  write(TokenDType::kUint16, {{15496, 50256}, {11}});
  IndexedDataset dataset(prefix_);
  EXPECT_THAT([&] { check_token_range(dataset, 257, "data.path", "the byte tokenizer's"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("data.path"), HasSubstr(prefix_),
                                         HasSubstr("token ids 11..50256"),
                                         HasSubstr("vocabulary is 257"),
                                         HasSubstr("model.vocab to at least 50257"))));
}

TEST_F(TokenRangeTest, NegativeIdsAreRefused) {
  write(TokenDType::kInt32, {{1, 2}});
  std::filesystem::remove(prefix_ + ".range");
  patch_first_int32(-4);
  IndexedDataset dataset(prefix_);
  EXPECT_THAT([&] { check_token_range(dataset, 70000, "data.path", "model.vocab"); },
              ThrowsMessage<Error>(HasSubstr("token ids -4..2")));
}

TEST_F(TokenRangeTest, IdsInsideTheVocabularyPass) {
  write(TokenDType::kUint16, {{0, 256}});
  IndexedDataset dataset(prefix_);
  EXPECT_NO_THROW(check_token_range(dataset, 257, "data.path", "the byte tokenizer's"));
}

}  // namespace
}  // namespace mh::data
