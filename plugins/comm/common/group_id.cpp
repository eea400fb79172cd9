#include "group_id.hpp"

#include <numeric>
#include <utility>

namespace mh::comm {

std::string format_ranks(std::span<const int32_t> ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

GroupId::GroupId(std::string name, std::vector<int32_t> members)
    : name_(std::move(name)), members_(std::move(members)) {}

GroupId GroupId::world(int32_t size) {
  std::vector<int32_t> members(size);
  std::iota(members.begin(), members.end(), 0);
  return GroupId("world", std::move(members));
}

GroupId GroupId::child(int32_t color, std::span<const int32_t> parent_ranks) const {
  std::vector<int32_t> members;
  members.reserve(parent_ranks.size());
  for (int32_t r : parent_ranks) members.push_back(members_[r]);
  return GroupId(name_ + "/color=" + std::to_string(color), std::move(members));
}

std::string GroupId::context(Collective c) const {
  return std::string(name(c)) + " on group " + name_ + " (global ranks " + format_ranks(members_) + ")";
}

std::string GroupId::globals(std::span<const int32_t> group_ranks) const {
  std::vector<int32_t> global;
  global.reserve(group_ranks.size());
  for (int32_t r : group_ranks) global.push_back(members_[r]);
  return (global.size() == 1 ? "global rank " : "global ranks ") + format_ranks(global);
}

}  // namespace mh::comm
