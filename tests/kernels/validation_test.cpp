// Both components reject a bad call alike: same code, same message, because
// the checks are one piece of code (plugins/kernels/common/validate.cpp).
#include "dry_kernels.hpp"
#include "example_args.hpp"

#include <deque>

namespace mh::kernels::test {
namespace {

using Dry = Instance<DryKernels>;

struct BadCall {
  const char* name;
  MH_ErrorCode code;
  const char* message;  // part of the expected message
  std::function<MH_Error*(const MH_KernelsApi&, MH_Instance*, ExampleArgs&)> call;
};

std::ostream& operator<<(std::ostream& os, const BadCall& bad) { return os << bad.name; }

const BadCall kBadCalls[] = {
    {"gemm_inner_dimensions", MH_INVALID_ARGUMENT, "gemm: op(a) is 4 x 6 but op(b) is 5 x 5: inner dimensions differ",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.b.shape[1] = 5;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_bf16", MH_UNIMPLEMENTED, "gemm: a is bf16, but this kernels component computes in f32 only",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.a.dtype = MH_BF16;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_not_3d", MH_INVALID_ARGUMENT, "gemm: a must be a 3-D view [batch, rows, cols], got [4, 6]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.a = view(e.gemm.a.data, MH_F32, {4, 6});
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_leading_dimension", MH_INVALID_ARGUMENT,
     "gemm: b's leading dimension strides[1] = 4 is smaller than its 5 columns",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.b.strides[1] = 4;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_batch_sizes", MH_INVALID_ARGUMENT, "gemm: batch sizes differ",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.a.shape[0] = 2;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_c_shape", MH_INVALID_ARGUMENT, "gemm: c is 4 x 4 but op(a) @ op(b) is 4 x 5",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.c.shape[2] = 4;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_overlapping_c", MH_INVALID_ARGUMENT, "gemm: the 2 matrices of c overlap",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.a.shape[0] = e.gemm.b.shape[0] = e.gemm.c.shape[0] = 2;
       e.gemm.c.strides[0] = 5;
       return api.gemm(self, &e.gemm);
     }},
    {"gemm_struct_size", MH_INVALID_ARGUMENT, "gemm: args.struct_size is 0",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.struct_size = 0;
       return api.gemm(self, &e.gemm);
     }},
    {"layernorm_weight_length", MH_INVALID_ARGUMENT, "layernorm: weight [5] has 5 elements, expected 6",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.layernorm.weight.shape[0] = 5;
       return api.layernorm(self, &e.layernorm);
     }},
    {"layernorm_mean_dtype", MH_INVALID_ARGUMENT, "layernorm: mean must be f32, got i32",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.layernorm.mean.dtype = MH_I32;
       return api.layernorm(self, &e.layernorm);
     }},
    {"layernorm_strided_x", MH_INVALID_ARGUMENT,
     "layernorm: x [4, 6] must be contiguous (row-major), got strides [12, 1]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.layernorm.x.strides[0] = 12;
       return api.layernorm(self, &e.layernorm);
     }},
    {"layernorm_bwd_dx_shape", MH_INVALID_ARGUMENT,
     "layernorm_bwd: dx [4, 5] is 4 x 5 as rows x cols, expected 4 x 6 like x",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.layernorm_bwd.dx = view(e.layernorm_bwd.dx.data, MH_F32, {4, 5});
       return api.layernorm_bwd(self, &e.layernorm_bwd);
     }},
    {"elementwise_op", MH_INVALID_ARGUMENT, "elementwise: op 99 is not an MH_UnaryOp (0 to 6)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.elementwise.op = 99;
       return api.elementwise(self, &e.elementwise);
     }},
    {"elementwise_y_size", MH_INVALID_ARGUMENT, "elementwise: y [4, 5] has 20 elements, expected 24",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.elementwise.y = view(e.elementwise.y.data, MH_F32, {4, 5});
       return api.elementwise(self, &e.elementwise);
     }},
    {"elementwise_null_x", MH_INVALID_ARGUMENT, "elementwise: x [4, 6] has data == NULL",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.elementwise.x.data = nullptr;
       return api.elementwise(self, &e.elementwise);
     }},
    {"bias_add_length", MH_INVALID_ARGUMENT, "bias_add: bias [7] has 7 elements, expected 6",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.bias.bias.shape[0] = 7;
       return api.bias_add(self, &e.bias);
     }},
    {"bias_bwd_length", MH_INVALID_ARGUMENT, "bias_bwd: bias (dbias) [7] has 7 elements, expected 6",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.bias.bias.shape[0] = 7;
       return api.bias_bwd(self, &e.bias);
     }},
    {"softmax_more_rows_than_columns", MH_INVALID_ARGUMENT,
     "softmax: x [6, 3] must be causal scores [..., Q, T] with 1 <= Q <= T (the last Q of T positions), got Q = 6, "
     "T = 3",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.softmax.x = view(e.softmax.x.data, MH_F32, {6, 3});
       return api.softmax(self, &e.softmax);
     }},
    {"softmax_no_rows", MH_INVALID_ARGUMENT, "softmax: x [2, 0, 3] must be causal scores [..., Q, T] with 1 <= Q <= T",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.softmax.x = view(e.softmax.x.data, MH_F32, {2, 0, 3});
       return api.softmax(self, &e.softmax);
     }},
    {"softmax_out_rows", MH_INVALID_ARGUMENT, "softmax: out [2, 3, 3] differs from x: 2 x [3, 3] vs 2 x [1, 3]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.softmax.x = view(e.softmax.x.data, MH_F32, {2, 1, 3});
       return api.softmax(self, &e.softmax);
     }},
    {"softmax_bwd_dout_columns", MH_INVALID_ARGUMENT,
     "softmax_bwd: dout [2, 2, 4] differs from out: 2 x [2, 4] vs 2 x [2, 3]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.softmax.out = view(e.softmax.out.data, MH_F32, {2, 2, 3});
       e.softmax.dout = view(e.softmax.dout.data, MH_F32, {2, 2, 4});
       return api.softmax_bwd(self, &e.softmax);
     }},
    {"softmax_bwd_dx_groups", MH_INVALID_ARGUMENT,
     "softmax_bwd: dx [1, 3, 3] differs from out: 1 x [3, 3] vs 2 x [3, 3]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.softmax.dx = view(e.softmax.dx.data, MH_F32, {1, 3, 3});
       return api.softmax_bwd(self, &e.softmax);
     }},
    {"dropout_p", MH_INVALID_ARGUMENT, "dropout: p must be in [0, 1), got 1",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.p = 1.0f;
       return api.dropout(self, &e.dropout);
     }},
    {"dropout_mask_dtype", MH_INVALID_ARGUMENT, "dropout: mask must be u8, got f32",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.mask.dtype = MH_F32;
       return api.dropout(self, &e.dropout);
     }},
    {"dropout_row_len", MH_INVALID_ARGUMENT, "dropout: x has 24 elements, not a whole number of rng rows of 5",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.rng.row_len = 5;
       return api.dropout(self, &e.dropout);
     }},
    {"dropout_row_stride", MH_INVALID_ARGUMENT,
     "dropout: rng.row_stride 3 is smaller than rng.row_len 6: rows would share draws",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.rng.row_stride = 3;
       return api.dropout(self, &e.dropout);
     }},
    {"dropout_bwd_p", MH_INVALID_ARGUMENT, "dropout_bwd: p must be in [0, 1)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.p = -0.1f;
       return api.dropout_bwd(self, &e.dropout);
     }},
    {"embedding_ids_dtype", MH_INVALID_ARGUMENT, "embedding: ids must be i32, got f32",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.embedding.ids.dtype = MH_F32;
       return api.embedding(self, &e.embedding);
     }},
    {"embedding_bwd_out_columns", MH_INVALID_ARGUMENT,
     "embedding_bwd: out [4, 5] is 4 x 5 as rows x cols, expected 4 x 6 like ids x table columns",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.embedding.out = view(e.embedding.out.data, MH_F32, {4, 5});
       return api.embedding_bwd(self, &e.embedding);
     }},
    {"xent_step", MH_INVALID_ARGUMENT, "xent: step 7 is not an MH_XentStep (0 to 2)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.xent.step = 7;
       return api.xent(self, &e.xent);
     }},
    {"xent_sum_exp_length", MH_INVALID_ARGUMENT, "xent: sum_exp [3] has 3 elements, expected 4",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.xent.step = MH_XENT_STATS;
       e.xent.sum_exp.shape[0] = 3;
       return api.xent(self, &e.xent);
     }},
    {"adamw_step", MH_INVALID_ARGUMENT, "adamw: step must be >= 1 (t counts from 1), got 0",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.adamw.step = 0;
       return api.adamw(self, &e.adamw);
     }},
    {"adamw_grad_length", MH_INVALID_ARGUMENT, "adamw: grad [23] has 23 elements, expected 24",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.adamw.grad.shape[0] = 23;
       return api.adamw(self, &e.adamw);
     }},
    {"sum_squares_out_length", MH_INVALID_ARGUMENT, "sum_squares: out [2] has 2 elements, expected 1",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.sum_squares.out.shape[0] = 2;
       return api.sum_squares(self, &e.sum_squares);
     }},
    {"xent_id_limit", MH_INVALID_ARGUMENT, "xent: id_limit must be >= 0 (0: no limit), got -1",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.xent.id_limit = -1;
       return api.xent(self, &e.xent);
     }},
    {"rmsnorm_struct_size", MH_INVALID_ARGUMENT, "bytes abi.h defines (fill it with MH_STRUCT_SIZE)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rmsnorm.struct_size = MH_STRUCT_SIZE(MH_RmsNormArgs, rstd);
       return api.rmsnorm(self, &e.rmsnorm);
     }},
    {"rmsnorm_weight_length", MH_INVALID_ARGUMENT, "rmsnorm: weight [5] has 5 elements, expected 6",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rmsnorm.weight.shape[0] = 5;
       return api.rmsnorm(self, &e.rmsnorm);
     }},
    {"rmsnorm_bwd_dx_dtype", MH_UNIMPLEMENTED, "rmsnorm_bwd: dx is bf16, but this kernels component",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rmsnorm_bwd.dx.dtype = MH_BF16;
       return api.rmsnorm_bwd(self, &e.rmsnorm_bwd);
     }},
    {"rope_odd_head_size", MH_INVALID_ARGUMENT, "rope: the head size D = 3 must be even",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rope.x = view(e.rope.x.data, MH_F32, {2, 3, 3});
       e.rope.out = view(e.rope.out.data, MH_F32, {2, 3, 3});
       return api.rope(self, &e.rope);
     }},
    {"rope_overlapping_rows", MH_INVALID_ARGUMENT, "rope: the rows of x [2, 3, 4] overlap with strides [4, 2, 1]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rope.x = with_strides(e.rope.x, {4, 2, 1});
       return api.rope(self, &e.rope);
     }},
    {"rope_partly_overlapping_out", MH_INVALID_ARGUMENT, "rope: out overlaps x, which the op does not allow",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rope.out.data = static_cast<float*>(e.rope.x.data) + 2;
       return api.rope(self, &e.rope);
     }},
    {"rope_theta", MH_INVALID_ARGUMENT, "rope: theta must be a finite base > 0 (10000 in Llama 2), got 0",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.rope.theta = 0.0f;
       return api.rope(self, &e.rope);
     }},
    {"swiglu_odd_columns", MH_INVALID_ARGUMENT, "swiglu: x [4, 5] must have an even number of columns",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.swiglu.x.shape[1] = 5;
       return api.swiglu(self, &e.swiglu);
     }},
    {"swiglu_row_stride", MH_INVALID_ARGUMENT,
     "swiglu: x [4, 6] needs unit column stride and a row stride of at least its columns, got strides [5, 1]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.swiglu.x.strides[0] = 5;
       return api.swiglu(self, &e.swiglu);
     }},
    {"swiglu_bwd_dx_aliases_x", MH_INVALID_ARGUMENT, "swiglu_bwd: dx overlaps x, which the op does not allow",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.swiglu.dx = e.swiglu.x;
       return api.swiglu_bwd(self, &e.swiglu);
     }},
    {"strided_copy_struct_size", MH_INVALID_ARGUMENT,
     "strided_copy: args.struct_size is 96, smaller than the 184 bytes abi.h defines",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.struct_size = MH_STRUCT_SIZE(MH_StridedCopyArgs, x);
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_dtype", MH_INVALID_ARGUMENT, "strided_copy: x is u8; strided_copy copies f32, bf16, f16 or i32",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.x.dtype = e.strided_copy.out.dtype = MH_U8;
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_converting", MH_INVALID_ARGUMENT,
     "strided_copy: out is bf16 but x is f32 (the op copies, it does not convert)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.out.dtype = MH_BF16;
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_shape", MH_INVALID_ARGUMENT, "strided_copy: out [2, 2, 4] differs from x [2, 3, 4] in shape",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.out.shape[1] = 2;
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_innermost_stride", MH_INVALID_ARGUMENT,
     "strided_copy: out must have unit innermost stride, got strides [20, 8, 2]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.out = with_strides(e.strided_copy.out, {20, 8, 2});
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_negative_stride", MH_INVALID_ARGUMENT,
     "strided_copy: x [2, 3, 4] has a negative stride in [-12, 4, 1] (batches and rows run forward in memory)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.x = with_strides(e.strided_copy.x, {-12, 4, 1});
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_overlapping_rows", MH_INVALID_ARGUMENT,
     "strided_copy: the rows of out [2, 3, 4] overlap with strides [20, 2, 1]",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.out = with_strides(e.strided_copy.out, {20, 2, 1});
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"strided_copy_out_overlaps_x", MH_INVALID_ARGUMENT, "strided_copy: out overlaps x, which the op does not allow",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.strided_copy.out = with_strides(view(static_cast<float*>(e.strided_copy.x.data) + 8, MH_F32, {2, 3, 4}),
                                         {20, 4, 1});
       return api.strided_copy(self, &e.strided_copy);
     }},
    {"gemm_a_on_another_device", MH_INVALID_ARGUMENT,
     "gemm: a is on cuda:0, but this kernels component works on cpu (MH_Tensor.device, device_id)",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.gemm.a.device = MH_DEVICE_CUDA;
       return api.gemm(self, &e.gemm);
     }},
    {"adamw_v_on_another_device_id", MH_INVALID_ARGUMENT,
     "adamw: v is on cpu:1, but this kernels component works on cpu",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.adamw.v.device_id = 1;
       return api.adamw(self, &e.adamw);
     }},
    {"dropout_optional_residual_on_another_device", MH_INVALID_ARGUMENT, "dropout: residual is on cuda:0",
     [](auto& api, auto* self, ExampleArgs& e) {
       e.dropout.residual.device = MH_DEVICE_CUDA;
       return api.dropout(self, &e.dropout);
     }},
    {"copy_kind", MH_INVALID_ARGUMENT, "copy: kind 5 is not an MH_CopyKind (0 to 2)",
     [](auto& api, auto* self, ExampleArgs& e) { return api.copy(self, e.gemm.a.data, e.gemm.b.data, 4, 5); }},
};

void* fake_buffer(const Dry& dry) {
  void* ptr = nullptr;
  mh::check(dry.api().alloc(dry.self(), kExampleBufferBytes, &ptr));
  return ptr;
}

// Host buffers that live as long as the test.
class HostBuffers {
 public:
  void* operator()() { return buffers_.emplace_back(kExampleBufferBytes / sizeof(float)).data(); }

 private:
  std::deque<std::vector<float>> buffers_;
};

class Validation : public ::testing::TestWithParam<BadCall> {};

TEST_P(Validation, CpuAndDryRejectTheCallAlike) {
  const BadCall& bad = GetParam();
  const Cpu cpu(1);
  HostBuffers host;
  ExampleArgs cpu_args([&] { return host(); });
  const mh::ErrorPtr cpu_error(bad.call(cpu.api(), cpu.self(), cpu_args));
  const Dry dry;
  ExampleArgs dry_args([&] { return fake_buffer(dry); });
  const mh::ErrorPtr dry_error(bad.call(dry.api(), dry.self(), dry_args));
  ASSERT_NE(cpu_error, nullptr);
  ASSERT_NE(dry_error, nullptr);
  EXPECT_EQ(cpu_error->code, bad.code) << cpu_error->message;
  EXPECT_NE(std::string(cpu_error->message).find(bad.message), std::string::npos) << cpu_error->message;
  EXPECT_STREQ(cpu_error->message, dry_error->message);
  EXPECT_EQ(cpu_error->code, dry_error->code);
}

INSTANTIATE_TEST_SUITE_P(BadCalls, Validation, ::testing::ValuesIn(kBadCalls),
                         [](const auto& info) { return std::string(info.param.name); });

// An optional tensor left out (data NULL) holds nothing to read, so where it
// says it lives does not matter.
TEST(Validation, AnOptionalTensorWithoutDataIsNotCheckedForItsDevice) {
  HostBuffers host;
  ExampleArgs e([&] { return host(); });
  e.dropout.residual = MH_Tensor{};
  e.dropout.residual.device = MH_DEVICE_CUDA;
  e.softmax.struct_size = sizeof(MH_SoftmaxArgs);
  e.softmax.starts = MH_Tensor{};
  e.softmax.starts.device = MH_DEVICE_CUDA;
  const Cpu cpu(1);
  cpu.run(&MH_KernelsApi::dropout, e.dropout);
  cpu.run(&MH_KernelsApi::softmax, e.softmax);
}

// The bad calls above break one field of these; unbroken, every op accepts them.
TEST(ExampleArgs, AreValidForEveryOp) {
  HostBuffers host;
  run_every_op(Cpu(1), ExampleArgs([&] { return host(); }));
  const Dry dry;
  run_every_op(dry, ExampleArgs([&] { return fake_buffer(dry); }));
}

}  // namespace
}  // namespace mh::kernels::test
