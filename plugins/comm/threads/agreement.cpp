#include "agreement.hpp"

#include <megahost/error.hpp>

#include <vector>

namespace mh::comm::threads {

namespace {

const char* op_name(int32_t op) { return op == MH_REDUCE_MAX ? "max" : "sum"; }

std::string rank_name(const GroupId& group, size_t r) {
  const int32_t rank = static_cast<int32_t>(r);
  return group.globals({&rank, 1});
}

void same(const GroupId& group, size_t r, const char* field, const std::string& mine, const std::string& first) {
  require(mine == first, rank_name(group, r) + " passed " + field + " " + mine + " but " +
                             rank_name(group, 0) + " passed " + field + " " + first);
}

void same_call(const GroupId& group, size_t r, const Call& mine, const Call& first) {
  require(mine.kind == first.kind,
          rank_name(group, r) + " called " + name(mine.kind) + " but " + rank_name(group, 0) + " called " +
              name(first.kind));
  if (mine.kind == Collective::kBarrier || mine.kind == Collective::kSplit) return;
  same(group, r, "dtype", dtype_name(mine.dtype), dtype_name(first.dtype));
  if (mine.kind == Collective::kAllToAll) return;  // counts differ per rank: checked pairwise
  same(group, r, "count", std::to_string(mine.count), std::to_string(first.count));
  if (reduces(mine.kind)) same(group, r, "op", op_name(mine.op), op_name(first.op));
  if (mine.kind == Collective::kBroadcast)
    same(group, r, "root", std::to_string(mine.peer), std::to_string(first.peer));
}

// What rank r sends rank p is what p expects from r.
void counts_match(std::span<const Post> posts, const GroupId& group) {
  for (size_t r = 0; r < posts.size(); ++r)
    for (size_t p = 0; p < posts.size(); ++p) {
      const int64_t sent = posts[r].call.send_counts[p], expected = posts[p].call.recv_counts[r];
      require(sent == expected, rank_name(group, r) + " sends " + std::to_string(sent) + " elements to " +
                                    rank_name(group, p) + ", which expects " + std::to_string(expected) +
                                    " from it; exchange the counts first");
    }
}

}  // namespace

void agree(std::span<const Post> posts, const GroupId& group) {
  for (size_t r = 0; r < posts.size(); ++r)
    if (posts[r].error != MH_OK)
      throw Error(static_cast<MH_ErrorCode>(posts[r].error), rank_name(group, r) + ": " + posts[r].message);
  for (size_t r = 1; r < posts.size(); ++r) same_call(group, r, posts[r].call, posts[0].call);
  if (posts[0].call.kind == Collective::kAllToAll) counts_match(posts, group);
  if (posts[0].call.kind != Collective::kSplit) return;
  std::vector<SplitEntry> entries;
  for (const Post& p : posts) entries.push_back(p.split);
  check_colors(entries, group);
}

}  // namespace mh::comm::threads
