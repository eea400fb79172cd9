// What every part of a layer works with: the device, the rank's parameters,
// the tensor-parallel boundaries and the model's dimensions.
#pragma once

#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/tensor_parallel.hpp"

namespace mh {

struct PartContext {
  Device& dev;
  ParamSet& params;
  TensorParallel& tp;
  const ModelDims& d;

  // The weight the non-GEMM ops read (ParamSet::weight).
  TypedPtr P(int id) const { return params.weight(id); }
  float* G(int id) const { return params.grad(id); }
  // A buffer in the compute dtype.
  Buffer activation(MemCategory category, int64_t elements) const {
    return Buffer(dev, category, elements, dev.info().compute_dtype);
  }
};

}  // namespace mh
