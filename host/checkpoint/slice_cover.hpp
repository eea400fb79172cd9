// The proof that a tensor's slices cover it exactly once: no element in two
// slices (they would be read twice, one silently winning) and none in no
// slice (it would load as whatever the buffer held: zeros). Comparing the
// slices' total area with the tensor's cannot tell an overlap plus a gap of
// the same size from a cover, so every element is accounted for, band by
// band of rows.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/metadata.hpp"

namespace mh::ckpt {

// "" when `slices` (each inside `shape`) tile it exactly; else which
// element is covered twice (naming both slices' keys) or not at all.
std::string cover_problem(const std::array<int64_t, 2>& shape, const std::vector<SliceRef>& slices);

}  // namespace mh::ckpt
