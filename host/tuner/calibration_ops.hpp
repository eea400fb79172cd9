// The memory-bound kernels ops the cost model prices, each as a call the
// calibration can time: its name (as in the hardware profile's [[vector]]
// rows), the elements one call covers and the bytes it moves per element
// in f32, megahost's compute dtype on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tuner/calibration_team.hpp"

namespace mh {

struct VectorOp {
  std::string name;
  int64_t elements;
  double bytes_per_element;
  CalibrationTeam::Prepare prepare;
};

// The ops on calls of `rows` rows of 256 elements each.
std::vector<VectorOp> vector_ops(int64_t rows);

// The fixed cost of one kernels call as the engine makes them, one op after
// another: a chain of different one-row ops (layernorm, a 1 x 64 x 64
// product, bias, GeLU, a copy into the residual, a fill), whose work is
// negligible, so its time is the calls' own (dispatch, teams started and
// joined, caches handed from one op to the next). The profile's pseudo-op
// "call": one element per call, one byte per element.
VectorOp call_chain();

}  // namespace mh
