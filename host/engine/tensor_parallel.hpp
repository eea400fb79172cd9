// The conjugate communication operators at the boundaries of the
// tensor-parallel regions (Megatron's f and g; with sequence parallelism,
// all-gather and reduce-scatter along the sequence), executed as the tensor
// plugin's plan says. Communication lives here, apart from the layers.
//
//   enter: local [local_rows, h] -> full [rows, h]    (before QKV, FC1, logits)
//   exit:  partial [rows, h]     -> local [local_rows, h] (after proj, FC2, embedding)
// Each returns where its result is; with no collective that is the input
// itself, so t = 1 costs no copy.
#pragma once

#include <megahost/abi.h>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"

namespace mh {

class TensorParallel {
 public:
  TensorParallel(Device& device, Collectives& group, const MH_TensorPlan& plan, const ModelDims& dims);

  const MH_TensorPlan& plan() const { return plan_; }
  Collectives& group() { return group_; }

  // The result has the input's dtype. Reductions (the all-reduce and
  // reduce-scatter of partial sums) take f32 inputs: the engine keeps
  // partial sums in f32 in every precision.
  TypedPtr enter_fwd(TypedPtr local, Buffer& scratch);
  TypedPtr enter_bwd(TypedPtr full, Buffer& scratch);
  TypedPtr exit_fwd(TypedPtr partial, Buffer& scratch);
  TypedPtr exit_bwd(TypedPtr local, Buffer& scratch);

 private:
  // Runs `kind` from `in` (in_rows rows) into a result of out_rows rows.
  TypedPtr apply(int32_t kind, TypedPtr in, int64_t out_rows, Buffer& scratch);

  Device& device_;
  Collectives& group_;
  MH_TensorPlan plan_;
  ModelDims dims_;
};

}  // namespace mh
