// MPI_Comm_split semantics for every communicator: ranks that pass the same
// color form a group, ordered by key and then by their rank in the parent.
#pragma once

#include "group_id.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace mh::comm {

// What one rank passed to split. Two int32 so MPI can gather it as such.
struct SplitEntry {
  int32_t color;
  int32_t key;
};
static_assert(sizeof(SplitEntry) == 2 * sizeof(int32_t));

// Throws INVALID_ARGUMENT, without the call's context, naming the first rank
// of `parent` (entries[r] is group rank r's) that passed a negative color.
void check_colors(std::span<const SplitEntry> entries, const GroupId& parent);

// The parent group ranks that passed `color`, in their order in the new group.
std::vector<int32_t> split_members(std::span<const SplitEntry> entries, int32_t color);

}  // namespace mh::comm
