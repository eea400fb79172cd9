#include "split.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <string>

namespace mh::comm {

void check_colors(std::span<const SplitEntry> entries, const GroupId& parent) {
  for (size_t r = 0; r < entries.size(); ++r) {
    const int32_t rank = static_cast<int32_t>(r);
    require(entries[r].color >= 0, parent.globals({&rank, 1}) + " passed color " +
                                       std::to_string(entries[r].color) + "; colors must be >= 0");
  }
}

std::vector<int32_t> split_members(std::span<const SplitEntry> entries, int32_t color) {
  std::vector<int32_t> members;
  for (size_t r = 0; r < entries.size(); ++r)
    if (entries[r].color == color) members.push_back(static_cast<int32_t>(r));
  std::stable_sort(members.begin(), members.end(),
                   [&](int32_t a, int32_t b) { return entries[a].key < entries[b].key; });
  return members;
}

}  // namespace mh::comm
