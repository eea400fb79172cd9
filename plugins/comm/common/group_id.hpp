// Who a group is, for error messages: its name ("world", "world/color=1")
// and the global rank of each member, so every failure can say which
// collective on which ranks went wrong.
#pragma once

#include "collective.hpp"

#include <megahost/error.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mh::comm {

// "0-3,6,8-9": ranks in the given order, runs of consecutive ones as ranges.
std::string format_ranks(std::span<const int32_t> ranks);

class GroupId {
 public:
  // members[r]: the global rank of group rank r.
  GroupId(std::string name, std::vector<int32_t> members);

  // The world of `size` ranks: group rank r is global rank r.
  static GroupId world(int32_t size);

  int32_t size() const { return static_cast<int32_t>(members_.size()); }
  int32_t global(int32_t group_rank) const { return members_[group_rank]; }

  // The group split off for `color`, whose rank r is group rank parent_ranks[r] here.
  GroupId child(int32_t color, std::span<const int32_t> parent_ranks) const;

  // "all_reduce on group world/color=0 (global ranks 0-1)"
  std::string context(Collective c) const;

  // "global rank 3", "global ranks 1,3" for the given group ranks.
  std::string globals(std::span<const int32_t> group_ranks) const;

 private:
  std::string name_;
  std::vector<int32_t> members_;
};

// Runs f; an mh::Error it throws gets `c`'s context in `group` in front of
// its message.
template <class F>
auto with_context(const GroupId& group, Collective c, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), group.context(c) + ": " + e.what());
  }
}

}  // namespace mh::comm
