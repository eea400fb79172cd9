#include "data/mapped_file.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh::data {

namespace {

// What a path that is no regular file is, for the message; mmap would only
// say "No such device".
const char* not_a_file(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

}  // namespace

MappedFile::MappedFile(const std::string& path, std::string_view fix) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  require(fd >= 0, "cannot open " + path + ": " + std::strerror(errno) + "; " + std::string(fix),
          MH_NOT_FOUND);
  struct stat st {};
  int stat_rc = ::fstat(fd, &st);
  if (stat_rc == 0 && !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(MH_INVALID_ARGUMENT, path + " is " + not_a_file(st.st_mode) +
                                         ", not a regular file; " + std::string(fix));
  }
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

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace mh::data
