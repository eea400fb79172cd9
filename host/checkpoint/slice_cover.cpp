#include "checkpoint/slice_cover.hpp"

#include <algorithm>

namespace mh::ckpt {
namespace {

std::string element(int64_t row, int64_t col) {
  return "(" + std::to_string(row) + ", " + std::to_string(col) + ")";
}

// Within the band of rows starting at `row`, the slices crossing it (their
// column ranges, sorted) must follow each other from column 0 to `cols`.
std::string band_problem(int64_t row, int64_t cols, std::vector<const SliceRef*> crossing) {
  std::sort(crossing.begin(), crossing.end(),
            [](const SliceRef* a, const SliceRef* b) { return a->rect.col < b->rect.col; });
  int64_t next = 0;
  const SliceRef* previous = nullptr;
  for (const SliceRef* s : crossing) {
    if (s->rect.col > next) return "element " + element(row, next) + " is in no slice";
    if (s->rect.col < next)
      return "element " + element(row, s->rect.col) + " is in two slices, '" + previous->key + "' (file " +
             previous->file + ") and '" + s->key + "' (file " + s->file + ")";
    next = s->rect.col + s->rect.cols;
    previous = s;
  }
  if (next < cols) return "element " + element(row, next) + " is in no slice";
  return "";
}

}  // namespace

std::string cover_problem(const std::array<int64_t, 2>& shape, const std::vector<SliceRef>& slices) {
  if (shape[0] == 0 || shape[1] == 0) return "";
  std::vector<int64_t> bounds{0};
  std::vector<const SliceRef*> nonempty;
  for (const SliceRef& s : slices) {
    if (s.rect.rows == 0 || s.rect.cols == 0) continue;
    nonempty.push_back(&s);
    bounds.push_back(s.rect.row);
    bounds.push_back(s.rect.row + s.rect.rows);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  for (const int64_t row : bounds) {
    if (row >= shape[0]) break;
    std::vector<const SliceRef*> crossing;
    for (const SliceRef* s : nonempty)
      if (s->rect.row <= row && row < s->rect.row + s->rect.rows) crossing.push_back(s);
    if (std::string problem = band_problem(row, shape[1], std::move(crossing)); !problem.empty()) return problem;
  }
  return "";
}

}  // namespace mh::ckpt
