#include "report/metrics.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

namespace mh {

namespace {

// The first record of each run in the file, which may hold earlier runs.
nlohmann::json run_header() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  return {{"run", {{"pid", ::getpid()}, {"started_unix_s", seconds}}}};
}

// Writes all of `text` or fails with errno set.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(size_t(n));
  }
  return true;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  require(fd_ >= 0, "cannot open metrics file '" + path + "': " + std::strerror(errno) +
                        "; check --metrics_out / output.metrics");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(MH_INVALID_ARGUMENT, "metrics file '" + path_ + "' is locked by another run writing it (" +
                                         std::strerror(err) + "); give each run its own --metrics_out");
  }
  write(run_header());
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  // Generated text may end inside a UTF-8 sequence: such bytes become U+FFFD
  // rather than failing the record (its token ids are exact beside it).
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  if (write_all(fd_, line)) return;
  const int err = errno;
  // Cut the torn record off (a regular file; /dev/full has nothing to cut).
  if (end >= 0) (void)::ftruncate(fd_, end);
  throw Error(MH_RESOURCE_EXHAUSTED, "writing metrics to '" + path_ + "' failed: " + std::strerror(err) +
                                         " (disk full?); records up to the previous step are intact");
}

}  // namespace mh
