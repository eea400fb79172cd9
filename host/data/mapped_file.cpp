#include "data/mapped_file.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "data/regular_file.hpp"

namespace mh::data {

MappedFile::MappedFile(const std::string& path, std::string_view fix) : path_(path) {
  const int fd = open_regular_file(path, fix);
  struct stat st {};
  const int stat_rc = ::fstat(fd, &st);
  size_ = stat_rc == 0 ? static_cast<size_t>(st.st_size) : 0;
  // mmap refuses a zero length; an empty file simply has no bytes.
  void* data = size_ > 0 ? ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  int map_errno = errno;
  ::close(fd);
  require(
      stat_rc == 0 && data != MAP_FAILED,
      "cannot map " + path + " into memory: " + std::strerror(map_errno) + "; " + std::string(fix),
      MH_UNAVAILABLE);
  data_ = static_cast<const std::byte*>(data);
}

void MappedFile::will_need(size_t offset, size_t length) const {
  if (offset >= size_) return;
  // madvise wants a page-aligned start; the advice is only a hint, so its
  // failure changes nothing but speed.
  const size_t page = size_t(::sysconf(_SC_PAGESIZE)), start = offset / page * page;
  ::madvise(const_cast<std::byte*>(data_) + start, std::min(length, size_ - offset) + (offset - start), MADV_WILLNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace mh::data
