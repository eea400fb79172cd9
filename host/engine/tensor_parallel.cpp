#include "engine/tensor_parallel.hpp"

namespace mh {

TensorParallel::TensorParallel(Device& device, Collectives& group, const MH_TensorPlan& plan, const ModelDims& dims)
    : device_(device), group_(group), plan_(plan), dims_(dims) {}

float* TensorParallel::apply(int32_t kind, float* in, int64_t out_rows, Buffer& scratch) {
  const int64_t h = dims_.hidden;
  switch (kind) {
    case MH_COLL_ALL_REDUCE:
      group_.all_reduce(in, out_rows * h);
      return in;
    case MH_COLL_ALL_GATHER:
      scratch = Buffer(device_, MemCategory::kComm, out_rows * h);
      group_.all_gather(in, scratch.f32(), out_rows * h / group_.size());
      return scratch.f32();
    case MH_COLL_REDUCE_SCATTER:
      scratch = Buffer(device_, MemCategory::kComm, out_rows * h);
      group_.reduce_scatter(in, scratch.f32(), out_rows * h);
      return scratch.f32();
    default:
      return in;
  }
}

float* TensorParallel::enter_fwd(float* local, Buffer& scratch) {
  return apply(plan_.enter_fwd, local, dims_.rows(), scratch);
}
float* TensorParallel::enter_bwd(float* full, Buffer& scratch) {
  return apply(plan_.enter_bwd, full, dims_.local_rows(), scratch);
}
float* TensorParallel::exit_fwd(float* partial, Buffer& scratch) {
  return apply(plan_.exit_fwd, partial, dims_.local_rows(), scratch);
}
float* TensorParallel::exit_bwd(float* local, Buffer& scratch) {
  return apply(plan_.exit_bwd, local, dims_.rows(), scratch);
}

}  // namespace mh
