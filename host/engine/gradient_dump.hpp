// Writes the full (unsharded) gradient of every parameter, gathered over
// the tensor group, so tests can compare layouts element by element.
// Format: per parameter, u32 name length, the name, u64 count, count f32.
#pragma once

#include <string>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/params.hpp"

namespace mh {

// Collective over the tensor group; rank 0 of it writes `path` when `write`.
void dump_gradients(Device& device, const ParamSet& params, Collectives& tensor_group, const std::string& path,
                    bool write);

}  // namespace mh
