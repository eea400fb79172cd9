// Small valid arguments for every op, over buffers handed out by `buffer`
// (host memory for cpu, fake device addresses for dry). Tests break one
// field at a time to make an invalid call.
#pragma once

#include "test_util.hpp"

namespace mh::kernels::test {

// Every buffer has room for this many bytes, more than any example tensor
// needs, so a wrongly accepted call cannot write outside it.
inline constexpr uint64_t kExampleBufferBytes = 1 << 14;

struct ExampleArgs {
  // N = 4 rows of C = 6, G = 2 groups of S = 3, V = 5, R = 7 table rows,
  // head size D = 4, F = 3 SwiGLU columns; strided_copy writes rows 1..3 of
  // a [2, 5, 4] cache.
  explicit ExampleArgs(const std::function<void*()>& buffer) {
    auto f32 = [&](std::vector<int64_t> shape) { return view(buffer(), MH_F32, std::move(shape)); };
    gemm.struct_size = MH_STRUCT_SIZE(MH_GemmArgs, beta);
    gemm.a = f32({1, 4, 6});
    gemm.b = f32({1, 6, 5});
    gemm.c = f32({1, 4, 5});
    gemm.alpha = 1.0f;

    layernorm.struct_size = MH_STRUCT_SIZE(MH_LayerNormArgs, eps);
    layernorm.x = f32({4, 6});
    layernorm.weight = f32({6});
    layernorm.bias = f32({6});
    layernorm.out = f32({4, 6});
    layernorm.mean = f32({4});
    layernorm.rstd = f32({4});
    layernorm.eps = 1e-5f;

    layernorm_bwd.struct_size = MH_STRUCT_SIZE(MH_LayerNormBwdArgs, dbias);
    layernorm_bwd.dout = f32({4, 6});
    layernorm_bwd.x = f32({4, 6});
    layernorm_bwd.weight = f32({6});
    layernorm_bwd.mean = f32({4});
    layernorm_bwd.rstd = f32({4});
    layernorm_bwd.dx = f32({4, 6});
    layernorm_bwd.dweight = f32({6});
    layernorm_bwd.dbias = f32({6});

    elementwise.struct_size = MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha);
    elementwise.op = MH_ADD;
    elementwise.x = f32({4, 6});
    elementwise.y = f32({4, 6});
    elementwise.out = f32({4, 6});

    bias.struct_size = MH_STRUCT_SIZE(MH_BiasArgs, out);
    bias.x = f32({4, 6});
    bias.bias = f32({6});
    bias.out = f32({4, 6});

    softmax.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
    softmax.x = f32({2, 3, 3});
    softmax.out = f32({2, 3, 3});
    softmax.dout = f32({2, 3, 3});
    softmax.dx = f32({2, 3, 3});
    softmax.scale = 0.5f;

    dropout.struct_size = MH_STRUCT_SIZE(MH_DropoutArgs, rng);
    dropout.x = f32({4, 6});
    dropout.residual = f32({4, 6});
    dropout.out = f32({4, 6});
    dropout.mask = view(buffer(), MH_U8, {4, 6});
    dropout.p = 0.1f;
    dropout.rng = {1, 0, 6, 6};

    embedding.struct_size = MH_STRUCT_SIZE(MH_EmbeddingArgs, accumulate);
    embedding.table = f32({7, 6});
    embedding.ids = view(buffer(), MH_I32, {4});
    embedding.out = f32({4, 6});

    xent.struct_size = MH_STRUCT_SIZE(MH_XentArgs, id_limit);
    xent.step = MH_XENT_MAX;
    xent.logits = f32({4, 5});
    xent.targets = view(buffer(), MH_I32, {4});
    xent.row_max = f32({4});
    xent.sum_exp = f32({4});
    xent.target_logit = f32({4});
    xent.scale = 1.0f;

    adamw.struct_size = MH_STRUCT_SIZE(MH_AdamWArgs, step);
    adamw.param = f32({24});
    adamw.grad = f32({24});
    adamw.m = f32({24});
    adamw.v = f32({24});
    adamw.lr = 1e-3f;
    adamw.beta1 = 0.9f;
    adamw.beta2 = 0.999f;
    adamw.eps = 1e-8f;
    adamw.step = 1;

    sum_squares.struct_size = MH_STRUCT_SIZE(MH_SumSquaresArgs, out);
    sum_squares.x = f32({24});
    sum_squares.out = f32({1});

    rmsnorm.struct_size = MH_STRUCT_SIZE(MH_RmsNormArgs, eps);
    rmsnorm.x = f32({4, 6});
    rmsnorm.weight = f32({6});
    rmsnorm.out = f32({4, 6});
    rmsnorm.rstd = f32({4});
    rmsnorm.eps = 1e-5f;

    rmsnorm_bwd.struct_size = MH_STRUCT_SIZE(MH_RmsNormBwdArgs, dweight);
    rmsnorm_bwd.dout = f32({4, 6});
    rmsnorm_bwd.x = f32({4, 6});
    rmsnorm_bwd.weight = f32({6});
    rmsnorm_bwd.rstd = f32({4});
    rmsnorm_bwd.dx = f32({4, 6});
    rmsnorm_bwd.dweight = f32({6});

    rope.struct_size = MH_STRUCT_SIZE(MH_RopeArgs, inverse);
    rope.x = f32({2, 3, 4});
    rope.out = f32({2, 3, 4});
    rope.theta = 10000.0f;

    swiglu.struct_size = MH_STRUCT_SIZE(MH_SwigluArgs, dx);
    swiglu.x = f32({4, 6});
    swiglu.out = f32({4, 3});
    swiglu.dout = f32({4, 3});
    swiglu.dx = f32({4, 6});

    strided_copy.struct_size = MH_STRUCT_SIZE(MH_StridedCopyArgs, out);
    strided_copy.x = f32({2, 3, 4});
    strided_copy.out = with_strides(view(static_cast<float*>(buffer()) + 4, MH_F32, {2, 3, 4}), {20, 4, 1});
  }

  MH_GemmArgs gemm{};
  MH_LayerNormArgs layernorm{};
  MH_LayerNormBwdArgs layernorm_bwd{};
  MH_ElementwiseArgs elementwise{};
  MH_BiasArgs bias{};
  MH_SoftmaxArgs softmax{};
  MH_DropoutArgs dropout{};
  MH_EmbeddingArgs embedding{};
  MH_XentArgs xent{};
  MH_AdamWArgs adamw{};
  MH_SumSquaresArgs sum_squares{};
  MH_RmsNormArgs rmsnorm{};
  MH_RmsNormBwdArgs rmsnorm_bwd{};
  MH_RopeArgs rope{};
  MH_SwigluArgs swiglu{};
  MH_StridedCopyArgs strided_copy{};
};

// Runs every op of the table once on the example arguments.
template <class T>
void run_every_op(const Instance<T>& k, ExampleArgs e) {
  k.run(&MH_KernelsApi::gemm, e.gemm);
  k.run(&MH_KernelsApi::layernorm, e.layernorm);
  k.run(&MH_KernelsApi::layernorm_bwd, e.layernorm_bwd);
  for (int32_t op = MH_GELU; op <= MH_AXPY; ++op) {
    e.elementwise.op = op;
    k.run(&MH_KernelsApi::elementwise, e.elementwise);
  }
  k.run(&MH_KernelsApi::bias_add, e.bias);
  k.run(&MH_KernelsApi::bias_bwd, e.bias);
  k.run(&MH_KernelsApi::softmax, e.softmax);
  k.run(&MH_KernelsApi::softmax_bwd, e.softmax);
  k.run(&MH_KernelsApi::dropout, e.dropout);
  k.run(&MH_KernelsApi::dropout_bwd, e.dropout);
  k.run(&MH_KernelsApi::embedding, e.embedding);
  k.run(&MH_KernelsApi::embedding_bwd, e.embedding);
  for (int32_t step = MH_XENT_MAX; step <= MH_XENT_BWD; ++step) {
    e.xent.step = step;
    k.run(&MH_KernelsApi::xent, e.xent);
  }
  k.run(&MH_KernelsApi::adamw, e.adamw);
  k.run(&MH_KernelsApi::sum_squares, e.sum_squares);
  k.run(&MH_KernelsApi::rmsnorm, e.rmsnorm);
  k.run(&MH_KernelsApi::rmsnorm_bwd, e.rmsnorm_bwd);
  k.run(&MH_KernelsApi::rope, e.rope);
  k.run(&MH_KernelsApi::swiglu, e.swiglu);
  k.run(&MH_KernelsApi::swiglu_bwd, e.swiglu);
  k.run(&MH_KernelsApi::strided_copy, e.strided_copy);
}

}  // namespace mh::kernels::test
