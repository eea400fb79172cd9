// The data a collective moves, read and written straight between the
// buffers every rank posted: ranks are threads of one process, so no staging
// copy is needed. Every rank runs its share between arrival (all buffers
// posted) and departure (nobody touches them any more).
#pragma once

#include "agreement.hpp"

#include <span>

namespace mh::comm::threads {

// Rank `rank`'s share of the collective the agreed `posts` describe.
// Reductions combine ranks in rank order, r0 op r1 op r2 ..., so results are
// bit-reproducible and equal on every rank.
void move_data(std::span<const Post> posts, int32_t rank);

}  // namespace mh::comm::threads
