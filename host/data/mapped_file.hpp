// A read-only memory map of a whole file, so that a dataset far larger than
// memory is paged in only where samples are read.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace mh::data {

class MappedFile {
 public:
  // Throws mh::Error naming the path, the reason and then `fix` when the file
  // cannot be opened or mapped.
  MappedFile(const std::string& path, std::string_view fix);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // Asks the kernel to start reading bytes [offset, offset + length) in,
  // without waiting: a reader that works through the file in order overlaps
  // its work with the disk's.
  void will_need(size_t offset, size_t length) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mh::data
