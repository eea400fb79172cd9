#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

MH_BiasArgs bias_args(MH_Tensor x, MH_Tensor bias, MH_Tensor out) {
  MH_BiasArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_BiasArgs, out);
  args.x = x;
  args.bias = bias;
  args.out = out;
  return args;
}

TEST(BiasAdd, AddsTheBiasToEveryRowInPlace) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{7, 13}, {300, 130}}) {
    std::vector<float> x = random_floats(N * C, 1), bias = random_floats(C, 2);
    std::vector<double> expected(N * C);
    for (int64_t i = 0; i < N * C; ++i) expected[i] = static_cast<double>(x[i]) + bias[i % C];
    Cpu().run(&MH_KernelsApi::bias_add, bias_args(view(x, {N, C}), view(bias, {C}), view(x, {N, C})));
    EXPECT_TRUE(all_close(x, expected, 1e-6, 1e-7));
  }
}

// Backward: dbias (in `bias`) += column sums of dout (in `out`); x unused.
TEST(BiasBwd, AccumulatesFiniteDifferenceGradient) {
  constexpr int64_t N = 7, C = 13;
  std::vector<float> x = random_floats(N * C, 3), dout = random_floats(N * C, 4), dbias = random_floats(C, 5);
  const std::vector<float> dbias0 = dbias;
  Cpu().run(&MH_KernelsApi::bias_bwd, bias_args(MH_Tensor{}, view(dbias, {C}), view(dout, {N, C})));
  const auto grad = numeric_gradient(to_double(random_floats(C, 6)), [&](const std::vector<double>& b) {
    double loss = 0;
    for (int64_t i = 0; i < N * C; ++i) loss += dout[i] * (x[i] + b[i % C]);
    return loss;
  });
  std::vector<double> expected(C);
  for (int64_t c = 0; c < C; ++c) expected[c] = dbias0[c] + grad[c];
  EXPECT_TRUE(all_close(dbias, expected, kGradRtol, kGradAtol));
}

TEST(BiasBwd, SumsColumnsOnTwoThreads) {
  constexpr int64_t N = 300, C = 130;
  std::vector<float> dout = random_floats(N * C, 7), dbias(C, 1.0f);
  std::vector<double> expected(C, 1.0);
  for (int64_t i = 0; i < N * C; ++i) expected[i % C] += dout[i];
  Cpu(2).run(&MH_KernelsApi::bias_bwd, bias_args(MH_Tensor{}, view(dbias, {C}), view(dout, {N, C})));
  EXPECT_TRUE(all_close(dbias, expected, 1e-5, 1e-4));
}

}  // namespace
}  // namespace mh::kernels::test
