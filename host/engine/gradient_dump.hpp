// Writes the full (unsharded) gradient of every parameter, gathered over
// the tensor group (expert weights over the expert group), so tests can compare layouts element by element.
// Format: per parameter, u32 name length, the name, u64 count, count f32.
#pragma once

#include <string>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/params.hpp"

namespace mh {

// Collective over the tensor and expert groups; their rank 0 writes `path` when `write`.
void dump_gradients(Device& device, const ParamSet& params, Collectives& tensor_group, Collectives& expert_group,
                    const std::string& path, bool write);

}  // namespace mh
