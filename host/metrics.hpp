// Per-step metrics as JSON lines (one object per line, written whole with
// one system call so a crash loses nothing already written), and the human
// progress line.
#pragma once

#include <chrono>
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

// "step 40/150 [#####.....] loss 2.31 | 1830 tok/s | ETA 1m02s" on a
// terminal (rewritten in place), a plain log line otherwise.
class Progress {
 public:
  explicit Progress(int64_t total_steps);
  void update(int64_t step, double loss, double tokens_per_s, bool log_line);
  void finish();

 private:
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mh
