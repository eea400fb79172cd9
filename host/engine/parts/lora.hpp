// LoRA (Hu et al. 2021) beside a linear layer y [N, out] = x [N, in] @ W^T:
// y += scale * (x @ A^T) @ B^T with A [r, in], B [out, r] and scale =
// alpha / r. The shapes are the rank's: beside a column-parallel layer `in`
// is whole and `out` its shard, beside a row-parallel one `in` is the shard
// and y a partial sum the tensor group reduces with the base's, which the
// product distributes over (Megatron's ParallelLinearAdapter).
//
// The low-rank product z = scale * x @ A^T [N, r] is recomputed in backward
// rather than kept: it costs N in r multiply-adds, against the base's N in out.
#pragma once

#include <megahost/abi.h>

#include "engine/parts/part_context.hpp"

namespace mh {

// y ([1, N, out], any strides) += scale * (x [N, in] @ A^T) @ B^T; nothing
// without an adapter.
void lora_forward(const PartContext& c, const LoraIds& ids, TypedPtr x, MH_Tensor y, int64_t in, int64_t out);
// From dy ([1, N, out]): A's and B's gradients accumulate and dx ([1, N, in],
// already holding the base's input gradient) gains the adapter's.
void lora_backward(const PartContext& c, const LoraIds& ids, TypedPtr x, MH_Tensor dy, MH_Tensor dx, int64_t in,
                   int64_t out);

}  // namespace mh
