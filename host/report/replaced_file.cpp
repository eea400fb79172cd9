#include "report/replaced_file.hpp"

#include <megahost/error.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mh {

ReplacedFile::ReplacedFile(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp-" + std::to_string(::getpid())) {
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  require(out_.good(), "cannot create '" + temp_ + "' (written, then renamed to '" + path_ + "'): " + std::strerror(errno),
          MH_UNAVAILABLE);
}

ReplacedFile::~ReplacedFile() {
  if (committed_) return;
  out_.close();
  std::remove(temp_.c_str());
}

void ReplacedFile::commit() {
  out_.flush();
  const bool written = out_.good();
  const int write_errno = errno;
  out_.close();
  require(written && !out_.fail(), "writing '" + path_ + "' failed: " + std::strerror(write_errno) +
                                       " (disk full?); the previous file, if any, is kept",
          MH_UNAVAILABLE);
  require(std::rename(temp_.c_str(), path_.c_str()) == 0,
          "cannot rename '" + temp_ + "' to '" + path_ + "': " + std::strerror(errno), MH_UNAVAILABLE);
  committed_ = true;
}

}  // namespace mh
