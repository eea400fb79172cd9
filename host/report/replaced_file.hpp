// An output file written under a temporary name beside it and renamed over
// the path only once whole: a run that fails or is killed part-way leaves
// the previous file (or none), never a torn one.
#pragma once

#include <fstream>
#include <string>

namespace mh {

class ReplacedFile {
 public:
  // Opens PATH.tmp-PID for writing; throws mh::Error naming the path.
  explicit ReplacedFile(std::string path);
  // Removes the temporary file unless commit() ran.
  ~ReplacedFile();
  ReplacedFile(const ReplacedFile&) = delete;
  ReplacedFile& operator=(const ReplacedFile&) = delete;

  std::ofstream& out() { return out_; }
  // Flushes, checks every write succeeded, and renames into place; throws
  // mh::Error naming the path and the system's reason.
  void commit();

 private:
  std::string path_, temp_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace mh
