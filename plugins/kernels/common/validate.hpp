// Argument checks shared by every kernels component, so that the dry
// component rejects exactly what a computing one would: a dry run that passes
// is a real run that passes.
//
// Each check reads one op's arguments as abi.h documents them and returns the
// sizes the op runs over. It throws mh::Error with MH_INVALID_ARGUMENT naming
// the op, the tensor and the mismatch, or MH_UNIMPLEMENTED when a tensor holds
// a floating dtype the component does not take. A tensor with data that is
// not on the component's device (target.device) is refused first, by name.
// target.compute is the dtype the component computes in; a float tensor
// holds it or, for mixed precision (master weights, gradients, statistics),
// f32; only GEMM inputs a and b must hold exactly the compute dtype. With
// compute f32 every float tensor is f32. An output that aliases an input must
// share its dtype.
#pragma once

#include <megahost/abi.h>
#include <megahost/dtype.hpp>
#include <megahost/placement.hpp>

#include <cstdint>

namespace mh::kernels {

// The component an op runs on: what it computes in and where its memory is.
struct Target {
  MH_DType compute;
  Placement device;
};

// A contiguous tensor read as [rows, cols] by its last dimension.
struct Matrix {
  int64_t rows, cols;
};

// c[batch] (M x N) = op(a[batch]) (M x K) @ op(b[batch]) (K x N)
struct GemmDims {
  int64_t batch, m, n, k;
};

// [groups, rows, cols] causal scores: the last `rows` positions of a sequence
// of `cols`, so row i sees columns 0 .. cols - rows + i (rows == cols in training)
struct SoftmaxDims {
  int64_t groups, rows, cols;
};

// ids [tokens] select rows of table [rows, cols]; out is [tokens, cols]
struct EmbeddingDims {
  int64_t tokens, rows, cols;
};

// logits [rows, cols]; the first `in_vocab` columns hold ids below id_limit
// (all of them when id_limit is 0 or the args predate it)
struct XentDims {
  int64_t rows, cols, in_vocab;
};

// x, out: [groups, seq, dim] views; the row stride of x and out is each one's strides[1]
struct RopeDims {
  int64_t groups, seq, dim;
};

// x, out: [groups, rows, cols] views of elements of element_bytes each, rows
// and groups each one's strides[1] and strides[0] apart
struct StridedCopyDims {
  int64_t groups, rows, cols, element_bytes;
};

// x [rows, 2 ffn] (gate, then up) and out or dout [rows, ffn]
struct SwigluDims {
  int64_t rows, ffn;
};

// q, out [groups, heads, sq, dim] against k, v [groups, sk, dim]; the
// dropout draws index probabilities [groups, heads, rows, cols] at (row0 +
// i, col0 + j) (rows, cols: the call's sq, sk when the args leave them 0)
struct AttentionDims {
  int64_t groups, heads, sq, sk, dim;
  int64_t rows, cols, row0, col0;
  bool accumulate;  // the forward merges into out and lse
};

GemmDims check_gemm(const MH_GemmArgs& args, const Target& target);
Matrix check_layernorm(const MH_LayerNormArgs& args, const Target& target);
Matrix check_layernorm_bwd(const MH_LayerNormBwdArgs& args, const Target& target);
int64_t check_elementwise(const MH_ElementwiseArgs& args, const Target& target);
Matrix check_bias_add(const MH_BiasArgs& args, const Target& target);
// Backward reads dout from `out` and accumulates dbias into `bias`.
Matrix check_bias_bwd(const MH_BiasArgs& args, const Target& target);
SoftmaxDims check_softmax(const MH_SoftmaxArgs& args, const Target& target);
SoftmaxDims check_softmax_bwd(const MH_SoftmaxArgs& args, const Target& target);
int64_t check_dropout(const MH_DropoutArgs& args, const Target& target);
// Backward reads dout from `out` and writes dx into `x`.
int64_t check_dropout_bwd(const MH_DropoutArgs& args, const Target& target);
// Forward and backward (dtable in `table`, dout in `out`) take the same views.
EmbeddingDims check_embedding(const MH_EmbeddingArgs& args, const Target& target, const char* op);
// logits as [N, V]; checks the tensors the step reads and writes.
XentDims check_xent(const MH_XentArgs& args, const Target& target);
int64_t check_adamw(const MH_AdamWArgs& args, const Target& target);
int64_t check_sum_squares(const MH_SumSquaresArgs& args, const Target& target);
Matrix check_rmsnorm(const MH_RmsNormArgs& args, const Target& target);
Matrix check_rmsnorm_bwd(const MH_RmsNormBwdArgs& args, const Target& target);
RopeDims check_rope(const MH_RopeArgs& args, const Target& target);
// Forward reads x and writes out; backward reads x and dout and writes dx.
SwigluDims check_swiglu(const MH_SwigluArgs& args, const Target& target);
SwigluDims check_swiglu_bwd(const MH_SwigluArgs& args, const Target& target);
StridedCopyDims check_strided_copy(const MH_StridedCopyArgs& args, const Target& target);
// Forward reads q, k, v (starts) and writes out, lse; backward also reads
// out, dout, lse and accumulates into dq, dk, dv.
AttentionDims check_attention(const MH_AttentionArgs& args, const Target& target);
AttentionDims check_attention_bwd(const MH_AttentionArgs& args, const Target& target);
void check_copy(const void* dst, const void* src, uint64_t bytes, int32_t kind);

}  // namespace mh::kernels
