// Collects every problem found while reading the configuration and loading
// plugins, so the user gets all of them in one report (as GStreamer's parse
// does) instead of fixing them one run at a time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mh {

class Diagnostics {
 public:
  // `where` is "file:line:col", "file", or empty.
  void error(std::string where, std::string message);
  void warning(std::string where, std::string message);

  bool has_errors() const { return !errors_.empty(); }
  size_t error_count() const { return errors_.size(); }
  // One line per problem, errors first, each prefixed by its location.
  std::string report() const;
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
};

// "did you mean 'x'?" for the candidate closest to `word` by edit distance,
// or "" when nothing is close enough to be a plausible typo.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace mh
