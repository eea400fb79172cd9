#include "validate.hpp"

#include <megahost/args_tensors.hpp>
#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace mh::kernels {
namespace {

using std::to_string;

[[noreturn]] void fail(const char* op, const std::string& what, MH_ErrorCode code = MH_INVALID_ARGUMENT) {
  throw Error(code, std::string(op) + ": " + what);
}

std::string list(const int64_t* values, int32_t n) {
  std::string s = "[";
  for (int32_t i = 0; i < n; ++i) s += (i > 0 ? ", " : "") + to_string(values[i]);
  return s + "]";
}

std::string shape_of(const MH_Tensor& t) { return list(t.shape, std::clamp(t.ndim, 0, MH_MAX_DIMS)); }

std::string rows_cols(Matrix m) { return to_string(m.rows) + " x " + to_string(m.cols); }

bool is_float(int32_t dtype) { return dtype == MH_F32 || dtype == MH_BF16 || dtype == MH_F16; }

int64_t numel(const MH_Tensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// A caller that forgot struct_size, or one older than the ABI minor that
// introduced the op (`since`), would hand us fields we must not read.
void check_struct(const char* op, size_t got, size_t want) {
  if (got < want)
    fail(op, "args.struct_size is " + to_string(got) + ", smaller than the " + to_string(want) +
                 " bytes abi.h defines (fill it with MH_STRUCT_SIZE)");
}

// Which dtypes a tensor of the compute dtype may hold instead. Mixed
// precision keeps master weights, gradients and statistics in f32, so every
// float tensor may be f32 as well, except the inputs of a GEMM, which the
// tensor cores read in the compute dtype.
enum class Floats { kComputeOrF32, kComputeOnly };

void check_dtype(const char* op, const std::string& name, const MH_Tensor& t, MH_DType want, MH_DType compute,
                 Floats floats = Floats::kComputeOrF32) {
  if (t.dtype == want) return;
  const bool f32_too = want == compute && floats == Floats::kComputeOrF32;
  if (f32_too && t.dtype == MH_F32) return;
  if (want == compute && is_float(t.dtype))
    fail(op, name + " is " + dtype_name(t.dtype) + ", but this kernels component " +
                 (f32_too && compute != MH_F32 ? std::string("takes ") + dtype_name(compute) + " or f32 here"
                                               : std::string("computes in ") + dtype_name(compute) + " only"),
         MH_UNIMPLEMENTED);
  fail(op, name + " must be " + dtype_name(want) + ", got " + dtype_name(t.dtype));
}

// An output that aliases an input is rewritten element by element in place,
// which needs both views to hold the same dtype.
void same_dtype_if_aliased(const char* op, const std::string& out_name, const MH_Tensor& out,
                           const std::string& in_name, const MH_Tensor& in) {
  if (out.data != nullptr && out.data == in.data && out.dtype != in.dtype)
    fail(op, out_name + " aliases " + in_name + " but is " + dtype_name(out.dtype) + " where " + in_name + " is " +
                 dtype_name(in.dtype));
}

void check_view(const char* op, const std::string& name, const MH_Tensor& t) {
  if (t.ndim < 1 || t.ndim > MH_MAX_DIMS)
    fail(op, name + " has ndim " + to_string(t.ndim) + ", expected 1 to " + to_string(MH_MAX_DIMS));
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0) fail(op, name + " has a negative size in its shape " + shape_of(t));
  if (t.data == nullptr && numel(t) > 0) fail(op, name + " " + shape_of(t) + " has data == NULL");
}

// Row-major with no gaps; the stride of a size-1 dimension never matters.
bool contiguous(const MH_Tensor& t) {
  if (numel(t) == 0) return true;
  int64_t expected = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

Matrix matrix(const char* op, const std::string& name, const MH_Tensor& t, MH_DType dtype, MH_DType compute) {
  check_view(op, name, t);
  check_dtype(op, name, t, dtype, compute);
  if (!contiguous(t))
    fail(op, name + " " + shape_of(t) + " must be contiguous (row-major), got strides " +
                 list(t.strides, t.ndim));
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < t.ndim; ++i) rows *= t.shape[i];
  return {rows, t.shape[t.ndim - 1]};
}

int64_t elements(const char* op, const std::string& name, const MH_Tensor& t, MH_DType dtype, MH_DType compute) {
  Matrix m = matrix(op, name, t, dtype, compute);
  return m.rows * m.cols;
}

void vector(const char* op, const std::string& name, const MH_Tensor& t, int64_t n, MH_DType dtype,
            MH_DType compute) {
  if (int64_t got = elements(op, name, t, dtype, compute); got != n)
    fail(op, name + " " + shape_of(t) + " has " + to_string(got) + " elements, expected " + to_string(n));
}

void same_matrix(const char* op, const std::string& name, const MH_Tensor& t, Matrix want,
                 const std::string& like, MH_DType compute, MH_DType dtype) {
  Matrix got = matrix(op, name, t, dtype, compute);
  if (got.rows != want.rows || got.cols != want.cols)
    fail(op, name + " " + shape_of(t) + " is " + rows_cols(got) + " as rows x cols, expected " +
                 rows_cols(want) + " like " + like);
}

void same_matrix(const char* op, const std::string& name, const MH_Tensor& t, Matrix want,
                 const std::string& like, MH_DType compute) {
  same_matrix(op, name, t, want, like, compute, compute);
}

// Bytes of one element (only float dtypes and i32 reach the overlap checks).
int64_t element_bytes(int32_t dtype) { return dtype == MH_F32 || dtype == MH_I32 ? 4 : 2; }

// The bytes from a view's first element to one past its last.
std::pair<uintptr_t, uintptr_t> extent(const MH_Tensor& t) {
  int64_t last = 0;
  for (int32_t i = 0; i < t.ndim; ++i) last += (t.shape[i] - 1) * t.strides[i];
  const auto first = reinterpret_cast<uintptr_t>(t.data);
  return {first, first + static_cast<uintptr_t>((last + 1) * element_bytes(t.dtype))};
}

bool overlap(const MH_Tensor& a, const MH_Tensor& b) {
  if (numel(a) == 0 || numel(b) == 0) return false;
  const auto [a_first, a_end] = extent(a);
  const auto [b_first, b_end] = extent(b);
  return a_first < b_end && b_first < a_end;
}

void disjoint_from(const char* op, const std::string& name, const MH_Tensor& t, const std::string& other_name,
                   const MH_Tensor& other) {
  if (overlap(t, other)) fail(op, name + " overlaps " + other_name + ", which the op does not allow");
}

// A [rows, cols] view whose rows lie strides[0] >= cols apart, innermost
// contiguous: SwiGLU's input is the first 2F columns of a wider row.
Matrix strided_rows(const char* op, const std::string& name, const MH_Tensor& t, MH_DType compute) {
  check_view(op, name, t);
  check_dtype(op, name, t, compute, compute);
  if (t.ndim != 2) fail(op, name + " must be a 2-D view [rows, cols], got " + shape_of(t));
  if ((t.shape[1] > 1 && t.strides[1] != 1) || (t.shape[0] > 1 && t.strides[0] < t.shape[1]))
    fail(op, name + " " + shape_of(t) + " needs unit column stride and a row stride of at least its columns, "
                 "got strides " + list(t.strides, t.ndim));
  return {t.shape[0], t.shape[1]};
}

// One operand of a GEMM: [batch, rows, cols] with unit column stride; BLAS
// takes rows, cols and the leading dimension as 32-bit ints.
Matrix gemm_operand(const char* op, const std::string& name, const MH_Tensor& t, MH_DType compute, Floats floats) {
  check_view(op, name, t);
  check_dtype(op, name, t, compute, compute, floats);
  if (t.ndim != 3) fail(op, name + " must be a 3-D view [batch, rows, cols], got " + shape_of(t));
  if (t.strides[2] != 1) fail(op, name + " must have unit column stride, got strides[2] = " + to_string(t.strides[2]));
  if (t.strides[1] < std::max<int64_t>(1, t.shape[2]))
    fail(op, name + "'s leading dimension strides[1] = " + to_string(t.strides[1]) + " is smaller than its " +
                 to_string(t.shape[2]) + " columns");
  if (t.strides[0] < 0) fail(op, name + "'s batch stride strides[0] = " + to_string(t.strides[0]) + " is negative");
  if (t.shape[1] > INT_MAX || t.shape[2] > INT_MAX || t.strides[1] > INT_MAX)
    fail(op, name + " " + shape_of(t) + " with leading dimension " + to_string(t.strides[1]) +
                 " exceeds BLAS's 32-bit sizes");
  return {t.shape[1], t.shape[2]};
}

// The matrices of c are written concurrently, so they must not overlap:
// stacked one after another, or side by side within each row (heads).
bool disjoint(const MH_Tensor& c) {
  const int64_t batch = c.shape[0], rows = c.shape[1], cols = c.shape[2];
  const int64_t step = c.strides[0], ld = c.strides[1];
  const bool stacked = (rows - 1) * ld + cols <= step;
  const bool side_by_side = cols <= step && (batch - 1) * step + cols <= ld;
  return stacked || side_by_side;
}

std::string groups_rows_cols(SoftmaxDims d) {
  return to_string(d.groups) + " x [" + to_string(d.rows) + ", " + to_string(d.cols) + "]";
}

// Causal scores [..., Q, T] with 1 <= Q <= T (the last Q positions of T);
// empty scores (no groups, or T = 0 with Q = 0) are fine.
SoftmaxDims scores(const char* op, const std::string& name, const MH_Tensor& t, MH_DType compute) {
  Matrix m = matrix(op, name, t, compute, compute);
  if (t.ndim < 2) fail(op, name + " must be causal scores [..., Q, T], got " + shape_of(t));
  const int64_t rows = t.shape[t.ndim - 2];
  if (rows > m.cols || (rows == 0 && m.cols > 0))
    fail(op, name + " " + shape_of(t) + " must be causal scores [..., Q, T] with 1 <= Q <= T (the last Q of T "
                 "positions), got Q = " + to_string(rows) + ", T = " + to_string(m.cols));
  int64_t groups = 1;
  for (int32_t i = 0; i + 2 < t.ndim; ++i) groups *= t.shape[i];
  return {groups, rows, m.cols};
}

void same_scores(const char* op, const std::string& name, const MH_Tensor& t, SoftmaxDims want,
                 const std::string& like, MH_DType compute) {
  SoftmaxDims got = scores(op, name, t, compute);
  if (got.groups != want.groups || got.rows != want.rows || got.cols != want.cols)
    fail(op, name + " " + shape_of(t) + " differs from " + like + ": " + groups_rows_cols(got) + " vs " +
                 groups_rows_cols(want));
}

// A packed-documents table beside [G, rows, ...]: absent, or I32 [B, cols]
// with B dividing G (each sample's groups are consecutive). Returns whether
// it is present.
bool per_sample(const char* op, const std::string& name, const MH_Tensor& t, int64_t groups, int64_t cols) {
  if (t.data == nullptr) return false;
  const Matrix m = matrix(op, name, t, MH_I32, MH_I32);
  if (t.ndim != 2 || m.cols != cols || m.rows == 0 || groups % m.rows != 0)
    fail(op, name + " " + shape_of(t) + " must be I32 [B, " + to_string(cols) + "] with B dividing the " +
                 to_string(groups) + " groups (group g is sample g / (G / B))");
  return true;
}

// abi.h: a component refuses a tensor that is not on its device, before it
// reads any: every tensor member of the args (args_tensors.hpp) but one past
// the caller's struct_size (an optional later field) or without data.
template <class Args>
void on_device(const char* op, const Args& args, Placement device) {
  for_each_tensor(args, [&](const char* name, const MH_Tensor& t) {
    require_on_device(op, name, t, device, "this kernels component");
  });
}

void check_p(const char* op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) fail(op, "p must be in [0, 1), got " + to_string(p));
}

}  // namespace

GemmDims check_gemm(const MH_GemmArgs& args, const Target& target) {
  const char* op = "gemm";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_GemmArgs, beta));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix a = gemm_operand(op, "a", args.a, compute, Floats::kComputeOnly);
  const Matrix b = gemm_operand(op, "b", args.b, compute, Floats::kComputeOnly);
  const Matrix c = gemm_operand(op, "c", args.c, compute, Floats::kComputeOrF32);
  const int64_t batch = args.c.shape[0];
  if (args.a.shape[0] != batch || args.b.shape[0] != batch)
    fail(op, "batch sizes differ: a " + shape_of(args.a) + ", b " + shape_of(args.b) + ", c " + shape_of(args.c) +
                 " (broadcast with batch stride 0, not batch size 1)");
  const int64_t m = args.trans_a ? a.cols : a.rows, k = args.trans_a ? a.rows : a.cols;
  const int64_t kb = args.trans_b ? b.cols : b.rows, n = args.trans_b ? b.rows : b.cols;
  if (k != kb)
    fail(op, "op(a) is " + rows_cols({m, k}) + " but op(b) is " + rows_cols({kb, n}) +
                 ": inner dimensions differ (trans_a = " + to_string(args.trans_a) +
                 ", trans_b = " + to_string(args.trans_b) + ")");
  if (c.rows != m || c.cols != n)
    fail(op, "c is " + rows_cols(c) + " but op(a) @ op(b) is " + rows_cols({m, n}));
  if (batch > 1 && m > 0 && n > 0 && !disjoint(args.c))
    fail(op, "the " + to_string(batch) + " matrices of c overlap (batch stride " + to_string(args.c.strides[0]) +
                 ", leading dimension " + to_string(args.c.strides[1]) + ", " + rows_cols(c) + ")");
  return {batch, m, n, k};
}

Matrix check_layernorm(const MH_LayerNormArgs& args, const Target& target) {
  const char* op = "layernorm";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_LayerNormArgs, eps));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix x = matrix(op, "x", args.x, compute, compute);
  vector(op, "weight", args.weight, x.cols, compute, compute);
  vector(op, "bias", args.bias, x.cols, compute, compute);
  same_matrix(op, "out", args.out, x, "x", compute);
  vector(op, "mean", args.mean, x.rows, MH_F32, compute);
  vector(op, "rstd", args.rstd, x.rows, MH_F32, compute);
  same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  if (!(args.eps >= 0.0f)) fail(op, "eps must be >= 0, got " + to_string(args.eps));
  return x;
}

Matrix check_layernorm_bwd(const MH_LayerNormBwdArgs& args, const Target& target) {
  const char* op = "layernorm_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_LayerNormBwdArgs, dbias));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix x = matrix(op, "x", args.x, compute, compute);
  same_matrix(op, "dout", args.dout, x, "x", compute);
  same_matrix(op, "dx", args.dx, x, "x", compute);
  vector(op, "weight", args.weight, x.cols, compute, compute);
  vector(op, "dweight", args.dweight, x.cols, compute, compute);
  vector(op, "dbias", args.dbias, x.cols, compute, compute);
  vector(op, "mean", args.mean, x.rows, MH_F32, compute);
  vector(op, "rstd", args.rstd, x.rows, MH_F32, compute);
  same_dtype_if_aliased(op, "dx", args.dx, "dout", args.dout);
  return x;
}

int64_t check_elementwise(const MH_ElementwiseArgs& args, const Target& target) {
  const char* op = "elementwise";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  if (args.op < MH_GELU || args.op > MH_AXPY)
    fail(op, "op " + to_string(args.op) + " is not an MH_UnaryOp (0 to 6)");
  const int64_t n = elements(op, "out", args.out, compute, compute);
  if (args.op != MH_FILL) {
    vector(op, "x", args.x, n, compute, compute);
    same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  }
  if (args.op == MH_GELU_BWD || args.op == MH_ADD || args.op == MH_AXPY) {
    vector(op, "y", args.y, n, compute, compute);
    same_dtype_if_aliased(op, "out", args.out, "y", args.y);
  }
  return n;
}

Matrix check_bias_add(const MH_BiasArgs& args, const Target& target) {
  const char* op = "bias_add";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_BiasArgs, out));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix x = matrix(op, "x", args.x, compute, compute);
  vector(op, "bias", args.bias, x.cols, compute, compute);
  same_matrix(op, "out", args.out, x, "x", compute);
  same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  return x;
}

Matrix check_bias_bwd(const MH_BiasArgs& args, const Target& target) {
  const char* op = "bias_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_BiasArgs, out));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix dout = matrix(op, "out (dout)", args.out, compute, compute);
  vector(op, "bias (dbias)", args.bias, dout.cols, compute, compute);
  return dout;
}

SoftmaxDims check_softmax(const MH_SoftmaxArgs& args, const Target& target) {
  const char* op = "softmax";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_SoftmaxArgs, scale));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const SoftmaxDims x = scores(op, "x", args.x, compute);
  same_scores(op, "out", args.out, x, "x", compute);
  same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  if (reaches(args, &MH_SoftmaxArgs::starts)) per_sample(op, "starts", args.starts, x.groups, x.cols);
  return x;
}

SoftmaxDims check_softmax_bwd(const MH_SoftmaxArgs& args, const Target& target) {
  const char* op = "softmax_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_SoftmaxArgs, scale));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const SoftmaxDims out = scores(op, "out", args.out, compute);
  same_scores(op, "dout", args.dout, out, "out", compute);
  same_scores(op, "dx", args.dx, out, "out", compute);
  same_dtype_if_aliased(op, "dx", args.dx, "dout", args.dout);
  if (reaches(args, &MH_SoftmaxArgs::starts)) per_sample(op, "starts", args.starts, out.groups, out.cols);
  return out;
}

int64_t check_dropout(const MH_DropoutArgs& args, const Target& target) {
  const char* op = "dropout";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_DropoutArgs, rng));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const int64_t n = elements(op, "x", args.x, compute, compute);
  vector(op, "out", args.out, n, compute, compute);
  vector(op, "mask", args.mask, n, MH_U8, compute);
  same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  if (args.residual.data != nullptr) {
    vector(op, "residual", args.residual, n, compute, compute);
    same_dtype_if_aliased(op, "out", args.out, "residual", args.residual);
  }
  check_p(op, args.p);
  const MH_RngSpan& rng = args.rng;
  if (rng.row_len == 0) fail(op, "rng.row_len must be > 0");
  if (static_cast<uint64_t>(n) % rng.row_len != 0)
    fail(op, "x has " + to_string(n) + " elements, not a whole number of rng rows of " + to_string(rng.row_len));
  if (static_cast<uint64_t>(n) > rng.row_len && rng.row_stride < rng.row_len)
    fail(op, "rng.row_stride " + to_string(rng.row_stride) + " is smaller than rng.row_len " +
                 to_string(rng.row_len) + ": rows would share draws");
  return n;
}

int64_t check_dropout_bwd(const MH_DropoutArgs& args, const Target& target) {
  const char* op = "dropout_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_DropoutArgs, rng));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const int64_t n = elements(op, "out (dout)", args.out, compute, compute);
  vector(op, "x (dx)", args.x, n, compute, compute);
  same_dtype_if_aliased(op, "x (dx)", args.x, "out (dout)", args.out);
  vector(op, "mask", args.mask, n, MH_U8, compute);
  check_p(op, args.p);
  return n;
}

EmbeddingDims check_embedding(const MH_EmbeddingArgs& args, const Target& target, const char* op) {
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_EmbeddingArgs, accumulate));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix table = matrix(op, "table", args.table, compute, compute);
  const int64_t tokens = elements(op, "ids", args.ids, MH_I32, compute);
  same_matrix(op, "out", args.out, {tokens, table.cols}, "ids x table columns", compute);
  return {tokens, table.rows, table.cols};
}

XentDims check_xent(const MH_XentArgs& args, const Target& target) {
  const char* op = "xent";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_XentArgs, scale));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  // A caller whose struct ends before id_limit: every column counts.
  const bool has_limit = reaches(args, &MH_XentArgs::id_limit);
  const int64_t id_limit = has_limit ? args.id_limit : 0;
  if (id_limit < 0) fail(op, "id_limit must be >= 0 (0: no limit), got " + to_string(id_limit));
  if (args.step < MH_XENT_MAX || args.step > MH_XENT_BWD)
    fail(op, "step " + to_string(args.step) + " is not an MH_XentStep (0 to 2)");
  const Matrix logits = matrix(op, "logits", args.logits, compute, compute);
  vector(op, "row_max", args.row_max, logits.rows, MH_F32, compute);
  if (args.step != MH_XENT_MAX) {
    vector(op, "targets", args.targets, logits.rows, MH_I32, compute);
    vector(op, "sum_exp", args.sum_exp, logits.rows, MH_F32, compute);
  }
  if (args.step == MH_XENT_STATS) vector(op, "target_logit", args.target_logit, logits.rows, MH_F32, compute);
  const int64_t in_vocab = id_limit > 0 ? std::clamp(id_limit - args.id_start, int64_t{0}, logits.cols) : logits.cols;
  return {logits.rows, logits.cols, in_vocab};
}

int64_t check_adamw(const MH_AdamWArgs& args, const Target& target) {
  const char* op = "adamw";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_AdamWArgs, step));
  on_device(op, args, target.device);
  const int64_t n = elements(op, "param", args.param, MH_F32, MH_F32);
  vector(op, "grad", args.grad, n, MH_F32, MH_F32);
  vector(op, "m", args.m, n, MH_F32, MH_F32);
  vector(op, "v", args.v, n, MH_F32, MH_F32);
  if (args.step < 1) fail(op, "step must be >= 1 (t counts from 1), got " + to_string(args.step));
  if (!(args.beta1 >= 0.0f && args.beta1 < 1.0f)) fail(op, "beta1 must be in [0, 1), got " + to_string(args.beta1));
  if (!(args.beta2 >= 0.0f && args.beta2 < 1.0f)) fail(op, "beta2 must be in [0, 1), got " + to_string(args.beta2));
  return n;
}

int64_t check_sum_squares(const MH_SumSquaresArgs& args, const Target& target) {
  const char* op = "sum_squares";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_SumSquaresArgs, out));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const int64_t n = elements(op, "x", args.x, compute, compute);
  vector(op, "out", args.out, 1, MH_F32, compute);
  return n;
}

Matrix check_rmsnorm(const MH_RmsNormArgs& args, const Target& target) {
  const char* op = "rmsnorm";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_RmsNormArgs, eps));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix x = matrix(op, "x", args.x, compute, compute);
  vector(op, "weight", args.weight, x.cols, MH_F32, compute);
  same_matrix(op, "out", args.out, x, "x", compute);
  vector(op, "rstd", args.rstd, x.rows, MH_F32, compute);
  same_dtype_if_aliased(op, "out", args.out, "x", args.x);
  if (!(args.eps >= 0.0f)) fail(op, "eps must be >= 0, got " + to_string(args.eps));
  return x;
}

Matrix check_rmsnorm_bwd(const MH_RmsNormBwdArgs& args, const Target& target) {
  const char* op = "rmsnorm_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_RmsNormBwdArgs, dweight));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const Matrix x = matrix(op, "x", args.x, compute, compute);
  same_matrix(op, "dout", args.dout, x, "x", compute);
  same_matrix(op, "dx", args.dx, x, "x", compute, MH_F32);
  vector(op, "weight", args.weight, x.cols, MH_F32, compute);
  vector(op, "dweight", args.dweight, x.cols, MH_F32, compute);
  vector(op, "rstd", args.rstd, x.rows, MH_F32, compute);
  same_dtype_if_aliased(op, "dx", args.dx, "dout", args.dout);
  return x;
}

namespace {

// A [G, S, D] view as gemm's: unit innermost stride, rows S apart by
// strides[1], batches by strides[0], and no two rows overlapping. The caller
// checks the dtype.
RopeDims rows_view(const char* op, const std::string& name, const MH_Tensor& t) {
  check_view(op, name, t);
  if (t.ndim != 3) fail(op, name + " must be a 3-D view [G, S, D], got " + shape_of(t));
  const RopeDims d{t.shape[0], t.shape[1], t.shape[2]};
  if (d.groups * d.seq * d.dim == 0) return d;
  if (t.strides[2] != 1) fail(op, name + " must have unit innermost stride, got strides " + list(t.strides, 3));
  if (t.strides[0] < 0 || t.strides[1] < 0)
    fail(op, name + " " + shape_of(t) + " has a negative stride in " + list(t.strides, 3) +
                 " (batches and rows run forward in memory)");
  const bool rows_apart = (d.seq == 1 || t.strides[1] >= d.dim) && (d.groups == 1 || disjoint(t));
  if (!rows_apart)
    fail(op, "the rows of " + name + " " + shape_of(t) + " overlap with strides " + list(t.strides, 3) +
                 " (rows must lie at least D apart, batch after batch or side by side)");
  return d;
}

RopeDims rope_view(const char* op, const std::string& name, const MH_Tensor& t, MH_DType compute) {
  const RopeDims d = rows_view(op, name, t);
  check_dtype(op, name, t, compute, compute);
  return d;
}

}  // namespace

RopeDims check_rope(const MH_RopeArgs& args, const Target& target) {
  const char* op = "rope";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_RopeArgs, inverse));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const RopeDims x = rope_view(op, "x", args.x, compute);
  const RopeDims out = rope_view(op, "out", args.out, compute);
  if (out.groups != x.groups || out.seq != x.seq || out.dim != x.dim)
    fail(op, "out " + shape_of(args.out) + " differs from x " + shape_of(args.x));
  if (x.dim % 2 != 0) fail(op, "the head size D = " + to_string(x.dim) + " must be even (pairs i, i + D/2)");
  if (args.out.data == args.x.data) {
    same_dtype_if_aliased(op, "out", args.out, "x", args.x);
    if (args.out.strides[0] != args.x.strides[0] || args.out.strides[1] != args.x.strides[1])
      fail(op, "out is x in place but with strides " + list(args.out.strides, 3) + " instead of " +
                   list(args.x.strides, 3));
  } else {
    disjoint_from(op, "out", args.out, "x", args.x);
  }
  if (!(args.theta > 0.0f) || std::isinf(args.theta))
    fail(op, "theta must be a finite base > 0 (10000 in Llama 2), got " + to_string(args.theta));
  if (args.position_offset < 0)
    fail(op, "position_offset must be >= 0, got " + to_string(args.position_offset));
  if (reaches(args, &MH_RopeArgs::positions)) per_sample(op, "positions", args.positions, x.groups, x.seq);
  return x;
}

namespace {

// x [N, 2F] (gate, then up, in a row of stride >= 2F)
SwigluDims swiglu_input(const char* op, const MH_SwigluArgs& args, MH_DType compute) {
  const Matrix x = strided_rows(op, "x", args.x, compute);
  if (x.cols % 2 != 0)
    fail(op, "x " + shape_of(args.x) + " must have an even number of columns: the gate, then the up projection");
  return {x.rows, x.cols / 2};
}

}  // namespace

SwigluDims check_swiglu(const MH_SwigluArgs& args, const Target& target) {
  const char* op = "swiglu";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_SwigluArgs, dx));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const SwigluDims d = swiglu_input(op, args, compute);
  same_matrix(op, "out", args.out, {d.rows, d.ffn}, "x's rows x half its columns", compute);
  disjoint_from(op, "out", args.out, "x", args.x);
  return d;
}

SwigluDims check_swiglu_bwd(const MH_SwigluArgs& args, const Target& target) {
  const char* op = "swiglu_bwd";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_SwigluArgs, dx));
  on_device(op, args, target.device);
  const MH_DType compute = target.compute;
  const SwigluDims d = swiglu_input(op, args, compute);
  same_matrix(op, "dout", args.dout, {d.rows, d.ffn}, "x's rows x half its columns", compute);
  const Matrix dx = strided_rows(op, "dx", args.dx, compute);
  if (dx.rows != d.rows || dx.cols != 2 * d.ffn)
    fail(op, "dx " + shape_of(args.dx) + " must have the shape of x " + shape_of(args.x));
  disjoint_from(op, "dx", args.dx, "x", args.x);
  disjoint_from(op, "dx", args.dx, "dout", args.dout);
  return d;
}

// A byte copy, so every component takes every dtype a KV cache or an id
// buffer holds, whatever it computes in (f16 for a dry run modelling an f16
// device).
StridedCopyDims check_strided_copy(const MH_StridedCopyArgs& args, const Target& target) {
  const char* op = "strided_copy";
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_StridedCopyArgs, out));
  on_device(op, args, target.device);
  if (!is_float(args.x.dtype) && args.x.dtype != MH_I32)
    fail(op, std::string("x is ") + dtype_name(args.x.dtype) + "; strided_copy copies f32, bf16, f16 or i32");
  if (args.out.dtype != args.x.dtype)
    fail(op, std::string("out is ") + dtype_name(args.out.dtype) + " but x is " + dtype_name(args.x.dtype) +
                 " (the op copies, it does not convert)");
  const RopeDims x = rows_view(op, "x", args.x);
  const RopeDims out = rows_view(op, "out", args.out);
  if (out.groups != x.groups || out.seq != x.seq || out.dim != x.dim)
    fail(op, "out " + shape_of(args.out) + " differs from x " + shape_of(args.x) + " in shape");
  disjoint_from(op, "out", args.out, "x", args.x);
  return {x.groups, x.seq, x.dim, element_bytes(args.x.dtype)};
}

namespace {

// A q-like view [G, M, S, D]: innermost contiguous, the other strides
// non-negative (heads and rows may interleave, as in the engine's QKV rows).
void heads_view(const char* op, const std::string& name, const MH_Tensor& t, MH_DType compute) {
  check_view(op, name, t);
  check_dtype(op, name, t, compute, compute);
  if (t.ndim != 4) fail(op, name + " must be a 4-D view [G, M, S, D], got " + shape_of(t));
  if (numel(t) == 0) return;
  if (t.strides[3] != 1) fail(op, name + " must have unit innermost stride, got strides " + list(t.strides, 4));
  if (t.strides[0] < 0 || t.strides[1] < 0 || t.strides[2] < 0)
    fail(op, name + " " + shape_of(t) + " has a negative stride in " + list(t.strides, 4));
}

void same_shape(const char* op, const std::string& name, const MH_Tensor& t, const std::string& like,
                const MH_Tensor& want) {
  for (int32_t i = 0; i < want.ndim; ++i)
    if (t.ndim != want.ndim || t.shape[i] != want.shape[i])
      fail(op, name + " " + shape_of(t) + " differs from " + like + " " + shape_of(want) + " in shape");
}

AttentionDims attention_inputs(const char* op, const MH_AttentionArgs& args, MH_DType compute) {
  check_struct(op, args.struct_size, MH_STRUCT_SIZE(MH_AttentionArgs, dropout_col0));
  heads_view(op, "q", args.q, compute);
  const RopeDims k = rope_view(op, "k", args.k, compute);
  const RopeDims v = rope_view(op, "v", args.v, compute);
  AttentionDims d{args.q.shape[0], args.q.shape[1], args.q.shape[2], k.seq, args.q.shape[3], 0, 0, 0, 0, false};
  if (k.groups != d.groups || k.dim != d.dim)
    fail(op, "k " + shape_of(args.k) + " must be [G, Sk, D] with q's G = " + to_string(d.groups) +
                 " and D = " + to_string(d.dim) + " (q is " + shape_of(args.q) + ")");
  if (v.groups != k.groups || v.seq != k.seq || v.dim != k.dim)
    fail(op, "v " + shape_of(args.v) + " differs from k " + shape_of(args.k) + " in shape");
  heads_view(op, "out", args.out, compute);
  same_shape(op, "out", args.out, "q", args.q);
  vector(op, "lse", args.lse, d.groups * d.heads * d.sq, MH_F32, compute);
  per_sample(op, "starts", args.starts, d.groups, d.sq);
  check_p(op, args.dropout_p);
  d.rows = args.dropout_rows == 0 ? d.sq : args.dropout_rows;
  d.cols = args.dropout_cols == 0 ? d.sk : args.dropout_cols;
  d.row0 = args.dropout_row0;
  d.col0 = args.dropout_col0;
  if (args.struct_size >= MH_STRUCT_SIZE(MH_AttentionArgs, accumulate)) {
    if (args.accumulate != 0 && args.accumulate != 1)
      fail(op, "accumulate must be 0 or 1, not " + to_string(args.accumulate));
    d.accumulate = args.accumulate == 1;
  }
  if (d.row0 < 0 || d.col0 < 0 || d.row0 + d.sq > d.rows || d.col0 + d.sk > d.cols)
    fail(op, "the block at dropout_row0 " + to_string(d.row0) + ", dropout_col0 " + to_string(d.col0) + " of " +
                 to_string(d.sq) + " x " + to_string(d.sk) + " leaves the dropout probabilities " +
                 to_string(d.rows) + " x " + to_string(d.cols));
  if (args.dropout_p > 0.0f) {
    const MH_RngSpan& rng = args.rng;
    const auto n = static_cast<uint64_t>(d.groups * d.heads * d.rows * d.cols);
    if (rng.row_len == 0) fail(op, "rng.row_len must be > 0");
    if (n % rng.row_len != 0)
      fail(op, "the probabilities have " + to_string(n) + " elements, not a whole number of rng rows of " +
                   to_string(rng.row_len));
    if (n > rng.row_len && rng.row_stride < rng.row_len)
      fail(op, "rng.row_stride " + to_string(rng.row_stride) + " is smaller than rng.row_len " +
                   to_string(rng.row_len) + ": rows would share draws");
  }
  return d;
}

}  // namespace

AttentionDims check_attention(const MH_AttentionArgs& args, const Target& target) {
  const char* op = "attention";
  const AttentionDims d = attention_inputs(op, args, target.compute);
  on_device(op, args, target.device);
  for (const auto& [name, t] : {std::pair{"q", args.q}, {"k", args.k}, {"v", args.v}}) {
    disjoint_from(op, "out", args.out, name, t);
    disjoint_from(op, "lse", args.lse, name, t);
  }
  return d;
}

AttentionDims check_attention_bwd(const MH_AttentionArgs& args, const Target& target) {
  const char* op = "attention_bwd";
  const AttentionDims d = attention_inputs(op, args, target.compute);
  on_device(op, args, target.device);
  heads_view(op, "dout", args.dout, target.compute);
  same_shape(op, "dout", args.dout, "q", args.q);
  heads_view(op, "dq", args.dq, target.compute);
  same_shape(op, "dq", args.dq, "q", args.q);
  same_shape(op, "dk", args.dk, "k", args.k);
  same_shape(op, "dv", args.dv, "v", args.v);
  rope_view(op, "dk", args.dk, target.compute);
  rope_view(op, "dv", args.dv, target.compute);
  for (const auto& [grad, g] : {std::pair{"dq", args.dq}, {"dk", args.dk}, {"dv", args.dv}})
    for (const auto& [name, t] : {std::pair{"q", args.q}, {"k", args.k}, {"v", args.v}, {"out", args.out},
                                  {"dout", args.dout}, {"lse", args.lse}})
      disjoint_from(op, grad, g, name, t);
  return d;
}

void check_copy(const void* dst, const void* src, uint64_t bytes, int32_t kind) {
  const char* op = "copy";
  if (kind < MH_HOST_TO_DEVICE || kind > MH_DEVICE_TO_DEVICE)
    fail(op, "kind " + to_string(kind) + " is not an MH_CopyKind (0 to 2)");
  if (bytes > 0 && (dst == nullptr || src == nullptr))
    fail(op, "copying " + to_string(bytes) + " bytes with a NULL " + (dst == nullptr ? "dst" : "src"));
}

}  // namespace mh::kernels
