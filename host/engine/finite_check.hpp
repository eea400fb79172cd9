// Megatron's check after backward: a NaN or infinite loss or gradient norm
// stops the run, because the update would spread it into every weight.
#pragma once

#include <cstdint>

#include "engine/device.hpp"
#include "engine/params.hpp"

namespace mh {

struct NonFinitePolicy {
  bool skip;  // train.skip_nonfinite
  bool log;   // this rank reports a skipped step (one rank does: all see the same loss and norm)
};

// Returns true when the step may update the weights. A non-finite loss or
// norm throws mh::Error naming the step and the first parameter whose
// gradient on this rank is not finite, or, with policy.skip, logs that and
// returns false so the step's update is skipped.
bool finite_step(int64_t step, double loss, double grad_norm, NonFinitePolicy policy, const ParamSet& params,
                 Device& device);

}  // namespace mh
