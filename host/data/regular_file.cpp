#include "data/regular_file.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh::data {
namespace {

const char* not_a_file(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

}  // namespace

int open_regular_file(const std::string& path, std::string_view fix) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer. It changes
  // nothing for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  require(fd >= 0, "cannot open " + path + ": " + std::strerror(errno) + "; " + std::string(fix), MH_NOT_FOUND);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string what = ::fstat(fd, &st) == 0 ? not_a_file(st.st_mode) : std::strerror(errno);
    ::close(fd);
    throw Error(MH_INVALID_ARGUMENT, path + " is " + what + ", not a regular file; " + std::string(fix));
  }
  return fd;
}

std::string read_regular_file(const std::string& path, std::string_view fix) {
  const int fd = open_regular_file(path, fix);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      require(n == 0, "cannot read " + path + ": " + std::strerror(err) + "; " + std::string(fix), MH_UNAVAILABLE);
      return text;
    }
    text.append(buffer, size_t(n));
  }
}

}  // namespace mh::data
