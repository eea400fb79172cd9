// What each rank brings to a collective's rendezvous, and the check, run
// once all have arrived, that they describe the same call. Every rank reads
// the same verdict, so an argument error on one rank fails the call on all
// of them at once instead of leaving its peers to time out, and the group
// stays usable afterwards.
#pragma once

#include "collective.hpp"
#include "group_id.hpp"
#include "split.hpp"

#include <megahost/abi.h>

#include <span>
#include <string>

namespace mh::comm::threads {

struct Post {
  Call call;
  SplitEntry split{};
  int32_t error = MH_OK;  // this rank's arguments failed validate(); message says why
  std::string message;
};

// Throws mh::Error, without the call's context, unless every post is valid
// and all name the same call: kind, dtype and count, the op of a reduction,
// the root of a broadcast, non-negative split colors; for all_to_all the
// dtype and counts that match pairwise.
void agree(std::span<const Post> posts, const GroupId& group);

}  // namespace mh::comm::threads
