#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

// Causal softmax of scale * x over the last dimension of (G, S, S), in double.
std::vector<double> softmax_ref(const std::vector<double>& x, double scale, int64_t G, int64_t S) {
  std::vector<double> out(G * S * S, 0.0);
  for (int64_t row = 0; row < G * S; ++row) {
    const int64_t i = row % S;
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j <= i; ++j) max = std::max(max, scale * x[row * S + j]);
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(scale * x[row * S + j] - max);
    for (int64_t j = 0; j <= i; ++j) out[row * S + j] = std::exp(scale * x[row * S + j] - max) / sum;
  }
  return out;
}

MH_SoftmaxArgs softmax_args(std::vector<float>& x, std::vector<float>& out, std::vector<float>& dout,
                            std::vector<float>& dx, int64_t G, int64_t S, float scale) {
  MH_SoftmaxArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
  args.x = view(x, {G, S, S});
  args.out = view(out, {G, S, S});
  args.dout = view(dout, {G, S, S});
  args.dx = view(dx, {G, S, S});
  args.scale = scale;
  return args;
}

TEST(Softmax, ForwardIsCausalWithZerosAboveTheDiagonal) {
  for (auto [G, S] : {std::pair<int64_t, int64_t>{3, 7}, {8, 64}}) {
    SCOPED_TRACE(std::to_string(G) + " x " + std::to_string(S));
    constexpr float scale = 0.35f;
    std::vector<float> x = random_floats(G * S * S, 1, -3.0f, 3.0f), out(G * S * S, 5.0f), unused;
    Cpu().run(&MH_KernelsApi::softmax, softmax_args(x, out, unused, unused, G, S, scale));
    EXPECT_TRUE(all_close(out, softmax_ref(to_double(x), scale, G, S), 1e-5, 1e-7));
    for (int64_t row = 0; row < G * S; ++row)
      for (int64_t j = row % S + 1; j < S; ++j) ASSERT_EQ(out[row * S + j], 0.0f);
  }
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  constexpr int64_t G = 2, S = 5;
  constexpr float scale = 0.7f;
  std::vector<float> x = random_floats(G * S * S, 2, -2.0f, 2.0f), out(G * S * S), dout = random_floats(G * S * S, 3),
                     dx(G * S * S, 9.0f);
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::softmax, softmax_args(x, out, dout, dx, G, S, scale));
  cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(x, out, dout, dx, G, S, scale));
  const auto grad = numeric_gradient(to_double(x), [&](const std::vector<double>& v) {
    const auto y = softmax_ref(v, scale, G, S);
    double loss = 0;
    for (size_t i = 0; i < y.size(); ++i) loss += dout[i] * y[i];
    return loss;
  });
  EXPECT_TRUE(all_close(dx, grad, kGradRtol, kGradAtol));
}

}  // namespace
}  // namespace mh::kernels::test
