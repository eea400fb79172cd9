// LoRA (Hu et al. 2021) beside a linear layer y [N, out] = x [N, in] @ W^T:
// y += scale * (x @ A^T) @ B^T with A [r, in], B [out, r] and scale =
// alpha / r. The shapes are the rank's: beside a column-parallel layer `in`
// is whole and `out` its shard, beside a row-parallel one `in` is the shard
// and y a partial sum the tensor group reduces with the base's, which the
// product distributes over (Megatron's ParallelLinearAdapter).
//
// The low-rank product z = scale * x @ A^T [N, r] is recomputed in backward
// rather than kept: it costs N in r multiply-adds, against the base's N in out.
//
// With peft.dropout p > 0 in training the adapter reads dropout(x) and the
// base x (Hu et al.; PEFT's lora_dropout). The mask is drawn again in
// backward from the same counters rather than kept, so forward, backward and
// recomputation see one mask. Each target draws from its own stream over the
// whole input [N, in_full]: beside a row-parallel layer the rank's columns are
// its slice of it, so every tensor-parallel layout draws one rank's mask.
#pragma once

#include <megahost/abi.h>

#include "engine/parts/part_context.hpp"

namespace mh {

// One layer's adapter dropout in one pass; p 0 (evaluation, inference, or
// peft.dropout 0) draws nothing.
struct LoraDropout {
  float p = 0;
  uint64_t stream = 0;  // the layer's; each target derives its own
};
LoraDropout lora_dropout(const LayerPass& pass, int64_t layer);

// y ([1, N, out], any strides) += scale * (x [N, in] @ A^T) @ B^T; nothing
// without an adapter.
// `target` names the adapter's mask (and whether `in` is a column shard).
void lora_forward(const PartContext& c, const LoraIds& ids, const LoraDropout& drop, LoraTarget target, TypedPtr x,
                  MH_Tensor y, int64_t in, int64_t out);
// From dy ([1, N, out]): A's and B's gradients accumulate and dx ([N, in],
// already holding the base's input gradient) gains the adapter's.
void lora_backward(const PartContext& c, const LoraIds& ids, const LoraDropout& drop, LoraTarget target, TypedPtr x,
                   MH_Tensor dy, TypedPtr dx, int64_t in, int64_t out);

// A branch's output projection with its adapter (attention's proj, the MLP's
// FC2): partial f32 [N, out] = x [N, in] @ W^T + the adapter's, before the
// tensor-parallel exit.
void adapted_projection(const PartContext& c, TypedPtr x, int weight, const LoraIds& lora, const LoraDropout& drop,
                        LoraTarget target, float* partial, int64_t in, int64_t out);
// Its backward from dy [N, out]: W's and the adapter's gradients accumulate;
// returns x's gradient [N, in].
Buffer adapted_projection_bwd(const PartContext& c, TypedPtr x, int weight, const LoraIds& lora,
                              const LoraDropout& drop, LoraTarget target, TypedPtr dy, int64_t in, int64_t out);

}  // namespace mh
