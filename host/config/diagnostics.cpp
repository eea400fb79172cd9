#include "config/diagnostics.hpp"

#include <algorithm>
#include <numeric>

namespace mh {
namespace {

std::string located(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

void Diagnostics::error(std::string where, std::string message) {
  errors_.push_back(located(where, message));
}

void Diagnostics::warning(std::string where, std::string message) {
  warnings_.push_back(located(where, message));
}

std::string Diagnostics::report() const {
  std::string out;
  for (const auto& e : errors_) out += "error: " + e + "\n";
  for (const auto& w : warnings_) out += "warning: " + w + "\n";
  return out;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (best == nullptr || d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  // A typo changes a few characters; beyond a third of the word it is a
  // different word and a suggestion would only mislead.
  if (best == nullptr || best_distance > std::max<size_t>(2, word.size() / 3)) return "";
  return "did you mean '" + *best + "'?";
}

}  // namespace mh
