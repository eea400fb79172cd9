// A TensorBoard event file, written without TensorFlow: Event protocol
// buffers (scalars and text summaries) framed as TFRecords. docs/metrics.md
// says why it is written by hand and which fields it uses.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace mh::tensorboard {

class EventFile {
 public:
  // Creates `dir` (and its parents) and a new events.out.tfevents.<unix
  // seconds>.<host>.<pid> file in it; throws mh::Error naming `key` and the
  // path when it cannot.
  EventFile(const std::string& dir, const std::string& key);
  // A point of the scalar plot `tag`.
  void scalar(const std::string& tag, int64_t step, double value);
  // A text summary (TensorBoard's text plugin renders it as Markdown).
  void text(const std::string& tag, int64_t step, const std::string& markdown);
  // Writes buffered records out, so a reader sees them while training goes on.
  void flush();
  const std::string& path() const { return path_; }

 private:
  void record(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace mh::tensorboard
