#include "data/indexed_dataset.hpp"

#include "data/token_range.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>

namespace mh::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .idx/.bin layout is little-endian and read in place");

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
// fairseq's IndexedDataset (2019 and earlier), which Megatron replaced.
constexpr char kFairseqMagic[8] = {'T', 'N', 'T', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = sizeof kMagic + 8 + 1 + 8 + 8;
constexpr char kFix[] = "re-create the dataset with megahost_prepare";
constexpr char kMissingFix[] =
    "the dataset is named by its prefix, without .bin/.idx; create it with megahost_prepare";

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw Error(MH_INVALID_ARGUMENT, path + ": " + what + "; " + kFix);
}

size_t dtype_bytes(TokenDType dtype) {
  return dtype == TokenDType::kUint8 ? 1 : dtype == TokenDType::kUint16 ? 2 : 4;
}

// Megatron's dtype numbering, for naming what a file holds when we refuse it.
std::string megatron_dtype_name(uint8_t code) {
  static constexpr std::array<const char*, 9> names = {
      "unknown", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
  return code < names.size() ? names[code] : "unknown";
}

// Reads the little-endian fields of .idx in order.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  T next() {
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  template <class T>
  std::vector<T> array(uint64_t count) {
    std::vector<T> values(count);
    // An empty vector's data() may be NULL, which memcpy must not get even
    // for zero bytes (a dataset without sequences has such arrays).
    if (count > 0) std::memcpy(values.data(), bytes_.data() + at_, count * sizeof(T));
    at_ += count * sizeof(T);
    return values;
  }

 private:
  std::span<const std::byte> bytes_;
  size_t at_ = 0;
};

TokenDType checked_dtype(const std::string& path, uint8_t code) {
  if (code == static_cast<uint8_t>(TokenDType::kInt32)) return TokenDType::kInt32;
  if (code == static_cast<uint8_t>(TokenDType::kUint16)) return TokenDType::kUint16;
  if (code == static_cast<uint8_t>(TokenDType::kUint8)) return TokenDType::kUint8;
  corrupt(path, "token dtype code " + std::to_string(code) + " (" + megatron_dtype_name(code) +
                    ") is not supported; megahost reads uint16 (8) and int32 (4) tokens, and uint8 (1) loss masks");
}

// The counts come from the file itself, so they are checked against its size
// before anything is allocated from them.
void check_size(const std::string& path, size_t file_bytes, uint64_t sequences,
                uint64_t documents) {
  size_t body = file_bytes - kHeaderBytes;
  bool fits =
      sequences <= body / 12 && documents <= body / 8 && sequences * 12 + documents * 8 == body;
  // Megatron's multimodal datasets append one mode byte per sequence and
  // say so nowhere in the header: only the size tells.
  if (!fits && sequences <= body / 13 && documents <= body / 8 &&
      sequences * 13 + documents * 8 == body) {
    corrupt(path, "this is a Megatron multimodal index (a mode byte after each of its " +
                      std::to_string(sequences) +
                      " sequences), which megahost does not read; prepare text-only data");
  }
  if (!fits) {
    corrupt(path, "the header announces " + std::to_string(sequences) + " sequences and " +
                      std::to_string(documents) +
                      " document index entries, which do not match the " +
                      std::to_string(file_bytes) + " bytes of the file (truncated or corrupt)");
  }
}

void check_documents(const std::string& path, const std::vector<int64_t>& documents,
                     int64_t sequences) {
  if (documents.empty() || documents.front() != 0) {
    corrupt(path,
            "the document index must start with 0 (found " +
                (documents.empty() ? std::string("no entries") : std::to_string(documents[0])) +
                ")");
  }
  for (size_t d = 1; d < documents.size(); ++d) {
    if (documents[d] < documents[d - 1]) {
      corrupt(path, "the document index is not monotonic: entry " + std::to_string(d) + " is " +
                        std::to_string(documents[d]) + " after " +
                        std::to_string(documents[d - 1]));
    }
  }
  if (documents.back() != sequences) {
    corrupt(path, "the document index ends at sequence " + std::to_string(documents.back()) +
                      " but the file has " + std::to_string(sequences) + " sequences");
  }
}

void sync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;  // before close, which may set it
  if (fd >= 0) ::close(fd);
  require(synced, "cannot flush " + path + " to disk: " + std::strerror(err), MH_UNAVAILABLE);
}

void remove_if_present(const std::string& path) {
  require(::unlink(path.c_str()) == 0 || errno == ENOENT,
          "cannot replace " + path + ": " + std::strerror(errno) + "; check its folder's permissions",
          MH_UNAVAILABLE);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  require(::rename(from.c_str(), to.c_str()) == 0,
          "cannot rename " + from + " to " + to + ": " + std::strerror(errno), MH_UNAVAILABLE);
}

template <class T>
void widen(const std::byte* tokens, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, tokens + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int32_t>(value);
  }
}

}  // namespace

TokenDType dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kUint16 : TokenDType::kInt32;
}

std::string_view dtype_name(TokenDType dtype) {
  return dtype == TokenDType::kUint8 ? "uint8" : dtype == TokenDType::kUint16 ? "uint16" : "int32";
}

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), index_(read_index(prefix + ".idx")), bin_(prefix + ".bin", kMissingFix) {
  check_against_bin();
}

IndexedDataset::Index IndexedDataset::read_index(const std::string& path) {
  MappedFile file(path, kMissingFix);
  std::span<const std::byte> bytes = file.bytes();
  if (bytes.size() < kHeaderBytes) {
    corrupt(path, "truncated: " + std::to_string(bytes.size()) +
                      " bytes, but the header alone is " + std::to_string(kHeaderBytes));
  }
  if (std::memcmp(bytes.data(), kFairseqMagic, sizeof kFairseqMagic) == 0) {
    corrupt(path, "this is a fairseq IndexedDataset index (magic TNTIDX, the format before 2020), "
                  "which megahost does not read; re-create it from the text with megahost_prepare "
                  "or convert it with Megatron's tools");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    corrupt(path, "bad magic: this is not a Megatron indexed dataset index (MMIDIDX)");
  }
  Reader reader(bytes.subspan(sizeof kMagic));
  auto version = reader.next<uint64_t>();
  if (version != kVersion) {
    corrupt(path, "index version " + std::to_string(version) + " is not supported (only 1)");
  }
  Index index;
  index.dtype = checked_dtype(path, reader.next<uint8_t>());
  auto sequences = reader.next<uint64_t>();
  auto documents = reader.next<uint64_t>();
  check_size(path, bytes.size(), sequences, documents);
  index.lengths = reader.array<int32_t>(sequences);
  index.pointers = reader.array<int64_t>(sequences);
  index.documents = reader.array<int64_t>(documents);
  check_documents(path, index.documents, static_cast<int64_t>(sequences));
  return index;
}

void IndexedDataset::check_against_bin() const {
  const auto bin_bytes = static_cast<int64_t>(bin_.bytes().size());
  const auto item = static_cast<int64_t>(dtype_bytes(index_.dtype));
  int64_t end = 0;  // where the index says the tokens end
  for (int64_t s = 0; s < sequence_count(); ++s) {
    int64_t start = index_.pointers[s], length = index_.lengths[s];
    bool inside = start >= 0 && start % item == 0 && length >= 0 && start <= bin_bytes &&
                  length <= (bin_bytes - start) / item;
    if (!inside) {
      corrupt(bin_.path(),
              "sequence " + std::to_string(s) + " (" + std::to_string(length) + " tokens at byte " +
                  std::to_string(start) + ") does not lie within the " + std::to_string(bin_bytes) +
                  " bytes of the file: it is truncated or does not belong to " + prefix_ + ".idx");
    }
    end = std::max(end, start + length * item);
  }
  // A .bin longer than its index is another dataset's (or a half-written
  // one's): reading it would train on tokens the index does not describe.
  if (end != bin_bytes) {
    corrupt(bin_.path(), "the file has " + std::to_string(bin_bytes) + " bytes but " + prefix_ +
                             ".idx describes " + std::to_string(end) +
                             " bytes of tokens: the two files are not one dataset");
  }
}

void IndexedDataset::read(int64_t sequence, int64_t offset, int64_t count, int32_t* out) const {
  // Checked with if, not require: the message is built only when it is needed
  // on this path that runs for every sample.
  if (sequence < 0 || sequence >= sequence_count() || offset < 0 || count < 0 ||
      offset + count > index_.lengths[sequence]) {
    throw Error(MH_INVALID_ARGUMENT, "IndexedDataset::read: tokens [" + std::to_string(offset) +
                                         ", " + std::to_string(offset + count) + ") of sequence " +
                                         std::to_string(sequence) + " are outside " + prefix_);
  }
  const std::byte* tokens =
      bin_.bytes().data() + index_.pointers[sequence] + offset * dtype_bytes(index_.dtype);
  if (index_.dtype == TokenDType::kUint8) {
    widen<uint8_t>(tokens, count, out);
  } else if (index_.dtype == TokenDType::kUint16) {
    widen<uint16_t>(tokens, count, out);
  } else {
    widen<int32_t>(tokens, count, out);
  }
  if (id_limit_ == 0) return;
  for (int64_t i = 0; i < count; ++i)
    if (out[i] < 0 || out[i] >= id_limit_)
      throw Error(MH_INVALID_ARGUMENT, prefix_ + ".bin: token " + std::to_string(offset + i) + " of sequence " +
                                           std::to_string(sequence) + " is id " + std::to_string(out[i]) +
                                           ", outside 0.." + std::to_string(id_limit_ - 1) +
                                           " (the .bin changed after its range was recorded in " + prefix_ +
                                           ".range?); " + id_fix_);
}

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDType dtype)
    : prefix_(prefix),
      dtype_(dtype),
      temp_suffix_(".tmp-" + std::to_string(::getpid())),
      temp_paths_{prefix + ".bin" + temp_suffix_, prefix + ".idx" + temp_suffix_, prefix + ".range" + temp_suffix_},
      bin_(temp_paths_[0], std::ios::binary | std::ios::trunc) {
  require(bin_.is_open(), "cannot create " + prefix + ".bin" + temp_suffix_ + "; check that its folder exists",
          MH_NOT_FOUND);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  // An unfinished dataset leaves nothing behind, and whatever was at the
  // prefix before stays as it was.
  bin_.close();
  for (const std::string& path : temp_paths_) ::unlink(path.c_str());
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  const int64_t max_token = dtype_ == TokenDType::kUint8    ? std::numeric_limits<uint8_t>::max()
                            : dtype_ == TokenDType::kUint16 ? std::numeric_limits<uint16_t>::max()
                                                            : std::numeric_limits<int32_t>::max();
  require(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
          prefix_ + ".bin: a document of " + std::to_string(tokens.size()) +
              " tokens is longer than a sequence may be (2^31 - 1); split it");
  for (int32_t token : tokens) {
    // Checked with if, not require: the message is built only on failure, on
    // this path that runs for every token.
    if (token < 0 || token > max_token) {
      throw Error(MH_INVALID_ARGUMENT, prefix_ + ".bin: token id " + std::to_string(token) + " does not fit " +
                                           std::string(dtype_name(dtype_)) +
                                           "; choose the dtype with dtype_for_vocab()");
    }
    range_.add(token);
  }
  if (dtype_ == TokenDType::kUint8) {
    std::vector<uint8_t> narrow(tokens.begin(), tokens.end());
    bin_.write(reinterpret_cast<const char*>(narrow.data()), narrow.size());
  } else if (dtype_ == TokenDType::kUint16) {
    std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    bin_.write(reinterpret_cast<const char*>(narrow.data()), narrow.size() * sizeof(uint16_t));
  } else {
    bin_.write(reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes());
  }
  require(bin_.good(), "cannot write " + prefix_ + ".bin (disk full?)", MH_UNAVAILABLE);
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::write_index(const std::string& path) const {
  const uint64_t sequences = lengths_.size();
  const uint64_t documents = sequences + 1;
  const auto code = static_cast<uint8_t>(dtype_);
  std::vector<int64_t> pointers(sequences), document_index(documents);
  for (uint64_t s = 0, bytes = 0; s < sequences; ++s) {
    pointers[s] = static_cast<int64_t>(bytes);
    bytes += static_cast<uint64_t>(lengths_[s]) * dtype_bytes(dtype_);
    document_index[s + 1] = static_cast<int64_t>(s + 1);
  }
  std::ofstream idx(path, std::ios::binary | std::ios::trunc);
  auto put = [&idx](const void* data, size_t size) {
    idx.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  };
  put(kMagic, sizeof kMagic);
  put(&kVersion, sizeof kVersion);
  put(&code, sizeof code);
  put(&sequences, sizeof sequences);
  put(&documents, sizeof documents);
  put(lengths_.data(), lengths_.size() * sizeof(int32_t));
  put(pointers.data(), pointers.size() * sizeof(int64_t));
  put(document_index.data(), document_index.size() * sizeof(int64_t));
  idx.close();
  require(!idx.fail(), "cannot write " + path + " (disk full?)", MH_UNAVAILABLE);
}

void IndexedDatasetWriter::finish() {
  bin_.close();
  require(!bin_.fail(), "cannot write " + prefix_ + ".bin (disk full?)", MH_UNAVAILABLE);
  const std::string bin = prefix_ + ".bin", idx = prefix_ + ".idx", range = prefix_ + ".range";
  write_index(idx + temp_suffix_);
  write_token_range(range + temp_suffix_, bin + temp_suffix_, idx + temp_suffix_, range_);
  for (const std::string& path : {bin, idx, range}) sync_file(path + temp_suffix_);
  // The old index goes first, so no moment pairs an old .idx with the new
  // .bin; the new index comes last, so a crash in between leaves no dataset
  // rather than a wrong one.
  for (const std::string& path : {idx, range}) remove_if_present(path);
  for (const std::string& path : {bin, range, idx}) rename_or_throw(path + temp_suffix_, path);
  finished_ = true;
}

}  // namespace mh::data
