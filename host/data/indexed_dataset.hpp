// Megatron's indexed dataset (MMapIndexedDataset): token ids in prefix.bin,
// their layout in prefix.idx. The .idx file, all little-endian:
//   9 bytes  magic "MMIDIDX\0\0"
//   u64      version, 1
//   u8       token dtype code (Megatron's numbering: 4 = int32, 8 = uint16;
//            1 = uint8 holds a loss mask, loss_mask.hpp)
//   u64      S, the number of sequences
//   u64      D, the number of document index entries (documents + 1)
//   i32[S]   sequence lengths, in tokens
//   i64[S]   sequence start offsets in .bin, in bytes
//   i64[D]   document index: document d is the sequences [doc[d], doc[d + 1])
// megahost writes one sequence per document, as Megatron's preprocessing does
// without sentence splitting, and reads datasets with any number.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/mapped_file.hpp"
#include "data/token_range.hpp"

namespace mh::data {

enum class TokenDType : uint8_t { kUint8 = 1, kInt32 = 4, kUint16 = 8 };

// uint16 while every id fits, with Megatron's margin (vocab < 65500), else int32.
TokenDType dtype_for_vocab(int64_t vocab_size);
std::string_view dtype_name(TokenDType dtype);

class IndexedDataset {
 public:
  // Opens prefix.idx and prefix.bin and checks that they agree; throws
  // mh::Error naming the file, the defect and the fix otherwise.
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  TokenDType dtype() const { return index_.dtype; }
  int64_t sequence_count() const { return static_cast<int64_t>(index_.lengths.size()); }
  int64_t document_count() const { return static_cast<int64_t>(index_.documents.size()) - 1; }
  // The first sequence of document d; d == document_count() gives the end.
  int64_t document_begin(int64_t document) const { return index_.documents.at(document); }
  int32_t sequence_length(int64_t sequence) const { return index_.lengths.at(sequence); }
  // The token bytes of .bin, exactly as long as the index says.
  std::span<const std::byte> bin_bytes() const { return bin_.bytes(); }
  const std::string& bin_path() const { return bin_.path(); }
  // Copies tokens [offset, offset + count) of a sequence into out; with an
  // id limit set, throws naming the dataset for an id outside 0..limit-1.
  void read(int64_t sequence, int64_t offset, int64_t count, int32_t* out) const;
  // Every id read from now on must lie in 0..limit-1. The range checked
  // before step 1 may come from a sidecar (token_range.hpp), which a
  // rewrite of the .bin that keeps its length and index does not change:
  // the ids read are checked too, one comparison per token.
  void limit_ids(int64_t limit, std::string fix) {
    id_limit_ = limit;
    id_fix_ = std::move(fix);
  }

 private:
  struct Index {
    TokenDType dtype;
    std::vector<int32_t> lengths;
    std::vector<int64_t> pointers;
    std::vector<int64_t> documents;
  };
  static Index read_index(const std::string& idx_path);
  void check_against_bin() const;

  std::string prefix_;
  Index index_;  // copied out of .idx, whose arrays are not aligned
  MappedFile bin_;
  int64_t id_limit_ = 0;  // 0: no limit
  std::string id_fix_;
};

// Writes a dataset one document (one sequence) at a time into temporary
// files (prefix.bin.tmp-PID, ...), which finish() renames into place: a run
// that fails or is interrupted leaves the dataset that was there before, or
// none, never a half-written one or an old index over new tokens. finish()
// also writes the prefix.range sidecar (token_range.hpp).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Throws mh::Error when a token does not fit the dtype.
  void add_document(std::span<const int32_t> tokens);
  void finish();

  int64_t document_count() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t token_count() const { return tokens_; }

 private:
  void write_index(const std::string& path) const;

  std::string prefix_;
  TokenDType dtype_;
  std::string temp_suffix_;
  // The temporary .bin, .idx and .range, named when constructed: the
  // destructor removes them without allocating (it may run because memory
  // ran out, and a throw there would terminate).
  std::array<std::string, 3> temp_paths_;
  std::ofstream bin_;
  std::vector<int32_t> lengths_;
  int64_t tokens_ = 0;
  TokenRange range_;
  bool finished_ = false;
};

}  // namespace mh::data
