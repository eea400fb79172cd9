// Per-step metrics as JSON lines (one object per line, written whole with
// one system call so a crash loses nothing already written).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mh {

class MetricsWriter {
 public:
  // An empty path writes nothing. An existing file is appended to, never
  // overwritten: each run starts with a {"run": ...} record. The file stays
  // locked (flock) while the run writes it; a second run on it is refused.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  // Appends one record; throws mh::Error naming the file when the write
  // fails (disk full, file removed), after cutting off what part of the
  // record was written, so the file holds whole records only.
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace mh
