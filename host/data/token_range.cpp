#include "data/token_range.hpp"

#include "data/indexed_dataset.hpp"
#include "data/mapped_file.hpp"

#include <megahost/error.hpp>
#include <megahost/rng.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>

namespace mh::data {
namespace {

constexpr char kHeader[] = "megahost token range 1";

// What identifies the dataset a sidecar describes: the size of its .bin and
// a hash of its whole .idx (sequence lengths and offsets), so a sidecar left
// beside a re-created or replaced dataset is not believed. Content, not
// modification times: a fresh checkout of a shipped dataset keeps its sidecar.
struct DatasetStamp {
  int64_t bin_bytes = -1;
  uint64_t idx_hash = 0;
  bool operator==(const DatasetStamp&) const = default;
};

DatasetStamp stamp_of(const std::string& bin_path, const std::string& idx_path) {
  struct stat st {};
  if (::stat(bin_path.c_str(), &st) != 0) return {};
  MappedFile idx(idx_path, "");
  std::span<const std::byte> bytes = idx.bytes();
  uint64_t hash = rng::splitmix64(bytes.size());
  for (size_t at = 0; at < bytes.size(); at += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + at, std::min<size_t>(8, bytes.size() - at));
    hash = rng::splitmix64(hash ^ word);
  }
  return {static_cast<int64_t>(st.st_size), hash};
}

bool write_sidecar(const std::string& path, const DatasetStamp& stamp, const TokenRange& range) {
  std::ofstream out(path, std::ios::trunc);
  out << kHeader << "\nbin_bytes " << stamp.bin_bytes << "\nidx_hash " << stamp.idx_hash
      << "\ntokens " << range.tokens << "\nmin " << range.min << "\nmax " << range.max << "\n";
  out.close();
  return !out.fail();
}

// Whether a .bin could hold this range: ids are at most int32 (the widest
// token dtype). An edited sidecar claiming more is rescanned, not believed.
bool holdable(const TokenRange& r) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  return r.tokens == 0 || (r.tokens > 0 && lo <= r.min && r.min <= r.max && r.max <= hi);
}

// The cached range, when the sidecar exists, parses and describes `stamp`.
std::optional<TokenRange> read_sidecar(const std::string& path, const DatasetStamp& stamp) {
  std::ifstream in(path);
  std::string header, key[5];
  DatasetStamp found;
  TokenRange range;
  if (!std::getline(in, header) || header != kHeader) return std::nullopt;
  in >> key[0] >> found.bin_bytes >> key[1] >> found.idx_hash >> key[2] >> range.tokens >> key[3] >>
      range.min >> key[4] >> range.max;
  bool parsed = !in.fail() && key[0] == "bin_bytes" && key[1] == "idx_hash" &&
                key[2] == "tokens" && key[3] == "min" && key[4] == "max";
  if (!parsed || !(found == stamp) || !holdable(range)) return std::nullopt;
  return range;
}

template <class T>
TokenRange scan(std::span<const std::byte> bytes) {
  TokenRange range;
  const size_t count = bytes.size() / sizeof(T);
  if (count == 0) return range;
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();
  // Plain min/max over a copy-free view: the compiler vectorises this loop.
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  range.tokens = static_cast<int64_t>(count);
  range.min = lo;
  range.max = hi;
  return range;
}

}  // namespace

void write_token_range(const std::string& path, const std::string& bin_path,
                       const std::string& idx_path, const TokenRange& range) {
  require(write_sidecar(path, stamp_of(bin_path, idx_path), range),
          "cannot write " + path + " (disk full?)", MH_UNAVAILABLE);
}

TokenRange dataset_token_range(const IndexedDataset& dataset) {
  const std::string path = dataset.prefix() + ".range";
  const DatasetStamp stamp = stamp_of(dataset.bin_path(), dataset.prefix() + ".idx");
  if (auto cached = read_sidecar(path, stamp)) return *cached;
  TokenRange range = dataset.dtype() == TokenDType::kUint16 ? scan<uint16_t>(dataset.bin_bytes())
                                                            : scan<int32_t>(dataset.bin_bytes());
  // Caching is best effort: a read-only dataset folder is scanned each run.
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  if (!write_sidecar(temp, stamp, range) || std::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
  }
  return range;
}

void check_token_range(const IndexedDataset& dataset, int64_t vocab, const std::string& key,
                       const std::string& vocab_source) {
  const TokenRange range = dataset_token_range(dataset);
  if (range.tokens == 0 || (range.min >= 0 && range.max < vocab)) return;
  std::ostringstream message;
  message << key << ": dataset " << dataset.prefix() << " holds token ids " << range.min << ".."
          << range.max << ", but the model's vocabulary is " << vocab << " (" << vocab_source
          << "), so ids must be 0.." << vocab - 1
          << "; set data.tokenizer to the tokenizer the dataset was prepared with, or model.vocab "
             "to at least "
          << range.max + 1;
  throw Error(MH_INVALID_ARGUMENT, message.str());
}

}  // namespace mh::data
