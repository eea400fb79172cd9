// The safetensors container (huggingface/safetensors' format): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw little-endian data. We use it for
// checkpoint files because the ecosystem reads it without us: Python's
// `safetensors` package opens any rank's file as it is. There is no C++
// implementation packaged in Debian, and the format is small enough that
// reading and writing it here is a page of code; the interop test holds it
// to the reference implementation.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/mapped_file.hpp"

namespace mh::safetensors {

struct TensorInfo {
  std::string dtype;            // "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct Header {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t data_start = 0;                      // offset of the data section in the file
};

// Bytes per element of a safetensors dtype name; 0 for names it does not know.
uint64_t dtype_bytes(const std::string& dtype);

// Parses and checks the header of `file` (named `path` in errors): lengths
// within the file, known dtypes, byte ranges that match their shapes and
// tile the data section without gaps or overlaps.
Header parse_header(std::span<const std::byte> file, const std::string& path);
// The same from the file's first bytes (`head`: its length, then at least
// its header, or all of a shorter file) and the file's size.
Header parse_header(std::span<const std::byte> head, uint64_t file_size, const std::string& path);
// Reads and parses the header of the open file `fd` of `file_size` bytes.
Header read_header(int fd, uint64_t file_size, const std::string& path);

// A tensor to write: its key, dtype, shape and bytes.
struct Entry {
  std::string key, dtype;
  std::vector<int64_t> shape;
};

struct Written {
  uint64_t bytes = 0;  // file size
  uint64_t xxh3 = 0;   // XXH3-64 of the whole file
};

// Writes a new file at `path` (refusing to replace one), the header then
// each entry's bytes as `data(i)` returns them, hashing as it goes, and
// fsyncs it. Throws mh::Error naming the path and errno on failure.
Written write_file(const std::string& path, const std::vector<Entry>& entries,
                   const std::map<std::string, std::string>& metadata,
                   const std::function<std::span<const std::byte>(size_t)>& data);

// XXH3-64 of a whole byte range.
uint64_t checksum(std::span<const std::byte> bytes);
// XXH3-64 of a whole mapped file, hashed window by window while the kernel
// reads the next windows in: the hash overlaps the disk, and the pages stay
// mapped for the reads that follow.
uint64_t checksum(const data::MappedFile& file);
std::string hex(uint64_t value);

// Reads the open file `fd` (`bytes` long, named `path` in errors) front to
// back once, in windows read a few ahead on a background thread, and hands
// each window with its offset to `each`, in order, on the calling thread
// while it is in the cache; returns the XXH3-64 of the whole file. One pass
// both checks and uses the data: cold, the disk's read is the bound, not
// a hash pass and a copy pass one after the other.
uint64_t stream_file(int fd, uint64_t bytes, const std::string& path,
                     const std::function<void(uint64_t at, std::span<const std::byte> window)>& each);

// A file mapped read-only with its header parsed.
class File {
 public:
  // `fix` ends the message when the file cannot be opened.
  explicit File(const std::string& path, std::string_view fix = "the checkpoint is incomplete; load another one");
  // A file already mapped (and verified, as a checkpoint's are).
  explicit File(std::unique_ptr<const data::MappedFile> map);
  const Header& header() const { return header_; }
  const std::string& path() const { return map_->path(); }
  std::span<const std::byte> bytes() const { return map_->bytes(); }
  // The data of `key`, or throws naming the file and the key.
  std::span<const std::byte> data(const std::string& key) const;

 private:
  std::unique_ptr<const data::MappedFile> map_;
  Header header_;
};

}  // namespace mh::safetensors
