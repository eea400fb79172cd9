#include "engine/tensor_parallel.hpp"

namespace mh {

TensorParallel::TensorParallel(Device& device, Collectives& group, const MH_TensorPlan& plan, const ModelDims& dims)
    : device_(device), group_(group), plan_(plan), dims_(dims) {}

TypedPtr TensorParallel::apply(int32_t kind, TypedPtr in, int64_t out_rows, Buffer& scratch) {
  const int64_t h = dims_.hidden;
  switch (kind) {
    case MH_COLL_ALL_REDUCE:
      group_.all_reduce(in, out_rows * h);
      return in;
    case MH_COLL_ALL_GATHER:
      scratch = Buffer(device_, MemCategory::kComm, out_rows * h, in.dtype);
      group_.all_gather(in, scratch.ptr(), out_rows * h / group_.size());
      return scratch.ptr();
    case MH_COLL_REDUCE_SCATTER:
      scratch = Buffer(device_, MemCategory::kComm, out_rows * h, in.dtype);
      group_.reduce_scatter(in, scratch.ptr(), out_rows * h);
      return scratch.ptr();
    default:
      return in;
  }
}

TypedPtr TensorParallel::enter_fwd(TypedPtr local, Buffer& scratch) {
  return apply(plan_.enter_fwd, local, dims_.rows(), scratch);
}
TypedPtr TensorParallel::enter_bwd(TypedPtr full, Buffer& scratch) {
  return apply(plan_.enter_bwd, full, dims_.local_rows(), scratch);
}
TypedPtr TensorParallel::exit_fwd(TypedPtr partial, Buffer& scratch) {
  return apply(plan_.exit_fwd, partial, dims_.local_rows(), scratch);
}
TypedPtr TensorParallel::exit_bwd(TypedPtr local, Buffer& scratch) {
  return apply(plan_.exit_bwd, local, dims_.rows(), scratch);
}

}  // namespace mh
