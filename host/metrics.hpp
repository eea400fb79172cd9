// Per-step metrics as JSON lines (one object per line, flushed each time so
// a crash loses nothing already written), and the human progress line.
#pragma once

#include <chrono>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace mh {

class MetricsWriter {
 public:
  // An empty path writes nothing.
  explicit MetricsWriter(const std::string& path);
  // Appends one record; throws mh::Error naming the file when the write
  // fails (disk full, file removed).
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
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
