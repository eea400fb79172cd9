#include "data/indexed_dataset.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>

namespace mh::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

const std::vector<std::vector<int32_t>> kDocuments = {{1, 2, 3}, {}, {65535, 0}, {7}};

// Byte offsets of the .idx fields for kDocuments (4 sequences, 5 index entries).
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kLengthsAt = 34;
constexpr size_t kPointersAt = kLengthsAt + 4 * 4, kDocumentsAt = kPointersAt + 8 * 4;

std::vector<int32_t> read_all(const IndexedDataset& dataset, int64_t sequence) {
  std::vector<int32_t> tokens(dataset.sequence_length(sequence));
  dataset.read(sequence, 0, static_cast<int64_t>(tokens.size()), tokens.data());
  return tokens;
}

class IndexedDatasetTest : public ::testing::Test {
 protected:
  std::string write(TokenDType dtype) {
    IndexedDatasetWriter writer(prefix_, dtype);
    for (const auto& document : kDocuments) writer.add_document(document);
    writer.finish();
    return prefix_;
  }
  // Overwrites bytes of prefix.idx at `at` with the bytes of value.
  template <class T>
  void patch_idx(size_t at, T value) {
    std::fstream idx(prefix_ + ".idx", std::ios::binary | std::ios::in | std::ios::out);
    idx.seekp(static_cast<std::streamoff>(at));
    idx.write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void truncate(const std::string& path, int64_t remove) {
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - remove);
  }
  // Opening fails with a message naming the file, the defect and the fix.
  void expect_error(const std::string& file, const std::string& defect) {
    EXPECT_THAT([&] { IndexedDataset dataset(prefix_); },
                ThrowsMessage<Error>(AllOf(HasSubstr(prefix_ + file), HasSubstr(defect),
                                           HasSubstr("megahost_prepare"))));
  }

  testing::TempDir dir_;
  std::string prefix_ = dir_.file("tokens");
};

TEST_F(IndexedDatasetTest, WrittenDocumentsReadBackUint16) {
  IndexedDataset dataset(write(TokenDType::kUint16));
  EXPECT_EQ(dataset.dtype(), TokenDType::kUint16);
  ASSERT_EQ(dataset.document_count(), 4);
  ASSERT_EQ(dataset.sequence_count(), 4);
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(dataset.document_begin(d), d);
    EXPECT_EQ(read_all(dataset, d), kDocuments[d]);
  }
  EXPECT_EQ(std::filesystem::file_size(prefix_ + ".bin"), 6u * 2);
}

TEST_F(IndexedDatasetTest, WrittenDocumentsReadBackInt32) {
  IndexedDataset dataset(write(TokenDType::kInt32));
  EXPECT_EQ(dataset.dtype(), TokenDType::kInt32);
  EXPECT_EQ(read_all(dataset, 2), kDocuments[2]);
  EXPECT_EQ(std::filesystem::file_size(prefix_ + ".bin"), 6u * 4);
}

TEST_F(IndexedDatasetTest, ReadsAPartOfASequence) {
  IndexedDataset dataset(write(TokenDType::kUint16));
  int32_t middle[2];
  dataset.read(0, 1, 2, middle);
  EXPECT_EQ(middle[0], 2);
  EXPECT_EQ(middle[1], 3);
  EXPECT_THROW(dataset.read(0, 2, 2, middle), Error);
}

TEST(TokenDType, Uint16BelowMegatronsThreshold) {
  EXPECT_EQ(dtype_for_vocab(257), TokenDType::kUint16);
  EXPECT_EQ(dtype_for_vocab(50257), TokenDType::kUint16);
  EXPECT_EQ(dtype_for_vocab(65499), TokenDType::kUint16);
  EXPECT_EQ(dtype_for_vocab(65500), TokenDType::kInt32);
}

TEST_F(IndexedDatasetTest, WriterRejectsTokensTheDtypeCannotHold) {
  IndexedDatasetWriter writer(prefix_, TokenDType::kUint16);
  EXPECT_THAT([&] { writer.add_document(std::vector<int32_t>{65536}); },
              ThrowsMessage<Error>(HasSubstr("token id 65536 does not fit uint16")));
  EXPECT_THROW(writer.add_document(std::vector<int32_t>{-1}), Error);
}

// Found by fuzzing (tests/fuzz/regressions/indexed_dataset): the empty arrays
// of such an index were read with memcpy from a NULL vector.
TEST_F(IndexedDatasetTest, DatasetWithoutDocumentsOpensEmpty) {
  IndexedDatasetWriter(prefix_, TokenDType::kUint16).finish();
  IndexedDataset dataset(prefix_);
  EXPECT_EQ(dataset.sequence_count(), 0);
  EXPECT_EQ(dataset.document_count(), 0);
}

TEST_F(IndexedDatasetTest, MissingIndexFile) { expect_error(".idx", "No such file"); }

TEST_F(IndexedDatasetTest, MissingBinFile) {
  write(TokenDType::kUint16);
  std::filesystem::remove(prefix_ + ".bin");
  expect_error(".bin", "No such file");
}

// mmap of a folder fails with ENODEV, which used to be the whole message.
TEST_F(IndexedDatasetTest, IndexThatIsADirectoryIsNamedAsSuch) {
  write(TokenDType::kUint16);
  std::filesystem::remove(prefix_ + ".idx");
  std::filesystem::create_directory(prefix_ + ".idx");
  expect_error(".idx is a directory, not a regular file", "named by its prefix");
}

// Opening a FIFO for reading waits for a writer: the run would hang.
TEST_F(IndexedDatasetTest, IndexThatIsAFifoIsRefusedInsteadOfWaitingOnIt) {
  write(TokenDType::kUint16);
  std::filesystem::remove(prefix_ + ".idx");
  ASSERT_EQ(::mkfifo((prefix_ + ".idx").c_str(), 0600), 0);
  expect_error(".idx is a FIFO, not a regular file", "named by its prefix");
}

TEST_F(IndexedDatasetTest, IndexShorterThanItsHeader) {
  write(TokenDType::kUint16);
  std::filesystem::resize_file(prefix_ + ".idx", 20);
  expect_error(".idx", "truncated: 20 bytes");
}

TEST_F(IndexedDatasetTest, BadMagic) {
  write(TokenDType::kUint16);
  patch_idx(0, 'X');
  expect_error(".idx", "bad magic");
}

TEST_F(IndexedDatasetTest, UnknownVersion) {
  write(TokenDType::kUint16);
  patch_idx(kVersionAt, uint64_t{2});
  expect_error(".idx", "index version 2 is not supported");
}

TEST_F(IndexedDatasetTest, UnsupportedDtypeCode) {
  write(TokenDType::kUint16);
  patch_idx(kDtypeAt, uint8_t{5});
  expect_error(".idx", "dtype code 5 (int64) is not supported");
}

TEST_F(IndexedDatasetTest, TruncatedIndexArrays) {
  write(TokenDType::kUint16);
  truncate(prefix_ + ".idx", 1);
  expect_error(".idx", "do not match the 121 bytes");
}

TEST_F(IndexedDatasetTest, DocumentIndexNotMonotonic) {
  write(TokenDType::kUint16);
  patch_idx(kDocumentsAt + 8 * 2, int64_t{0});
  expect_error(".idx", "not monotonic: entry 2 is 0 after 1");
}

TEST_F(IndexedDatasetTest, DocumentIndexNotStartingAtZero) {
  write(TokenDType::kUint16);
  patch_idx(kDocumentsAt, int64_t{1});
  expect_error(".idx", "must start with 0");
}

TEST_F(IndexedDatasetTest, DocumentIndexNotEndingAtTheLastSequence) {
  write(TokenDType::kUint16);
  patch_idx(kDocumentsAt + 8 * 4, int64_t{3});
  expect_error(".idx", "ends at sequence 3 but the file has 4 sequences");
}

TEST_F(IndexedDatasetTest, TruncatedBin) {
  write(TokenDType::kUint16);
  truncate(prefix_ + ".bin", 2);
  expect_error(".bin", "sequence 3 (1 tokens at byte 10) does not lie within the 10 bytes");
}

TEST_F(IndexedDatasetTest, PointerPastTheEndOfBin) {
  write(TokenDType::kUint16);
  patch_idx(kPointersAt + 8 * 0, int64_t{1000});
  expect_error(".bin", "sequence 0 (3 tokens at byte 1000) does not lie within");
}

TEST_F(IndexedDatasetTest, LengthPastTheEndOfBin) {
  write(TokenDType::kUint16);
  patch_idx(kLengthsAt + 4 * 2, int32_t{100});
  expect_error(".bin", "sequence 2 (100 tokens at byte 6) does not lie within");
}

TEST_F(IndexedDatasetTest, NegativeLength) {
  write(TokenDType::kUint16);
  patch_idx(kLengthsAt, int32_t{-3});
  expect_error(".bin", "sequence 0 (-3 tokens");
}

TEST_F(IndexedDatasetTest, IndexPairedWithALargerBinIsRefused) {
  write(TokenDType::kUint16);
  std::ofstream(prefix_ + ".bin", std::ios::binary | std::ios::app) << "more";
  expect_error(".bin", "the file has 16 bytes but " + prefix_ + ".idx describes 12 bytes");
}

TEST_F(IndexedDatasetTest, FailedWriteLeavesThePreviousDatasetAsItWas) {
  write(TokenDType::kUint16);
  {
    IndexedDatasetWriter failing(prefix_, TokenDType::kUint16);
    failing.add_document(std::vector<int32_t>(100, 9));
  }  // destroyed without finish(), as when the input fails partway
  IndexedDataset dataset(prefix_);
  ASSERT_EQ(dataset.document_count(), 4);
  EXPECT_EQ(read_all(dataset, 2), kDocuments[2]);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.file(""))) {
    EXPECT_THAT(entry.path().string(), ::testing::Not(HasSubstr(".tmp-"))) << "left behind";
  }
}

TEST_F(IndexedDatasetTest, FinishedRewriteReplacesBothFiles) {
  write(TokenDType::kUint16);
  IndexedDatasetWriter writer(prefix_, TokenDType::kUint16);
  writer.add_document(std::vector<int32_t>{4, 5});
  writer.finish();
  IndexedDataset dataset(prefix_);
  ASSERT_EQ(dataset.document_count(), 1);
  EXPECT_EQ(read_all(dataset, 0), (std::vector<int32_t>{4, 5}));
}

TEST_F(IndexedDatasetTest, FairseqIndexIsNamedAsSuch) {
  write(TokenDType::kUint16);
  std::fstream idx(prefix_ + ".idx", std::ios::binary | std::ios::in | std::ios::out);
  idx.write("TNTIDX\0\0", 8);
  idx.close();
  expect_error(".idx", "fairseq IndexedDataset index");
}

TEST_F(IndexedDatasetTest, MultimodalIndexIsNamedAsSuch) {
  write(TokenDType::kUint16);
  // Megatron's multimodal index: one mode byte per sequence after the arrays.
  std::ofstream(prefix_ + ".idx", std::ios::binary | std::ios::app) << std::string(4, '\0');
  expect_error(".idx", "Megatron multimodal index");
}

}  // namespace
}  // namespace mh::data
