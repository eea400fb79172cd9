#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

TEST(AdamW, MatchesScalarReferenceOverSteps) {
  constexpr float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  for (int64_t n : {1000, 50000}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> param = random_floats(n, 1), m(n, 0.0f), v(n, 0.0f), grad;
    std::vector<double> p_ref = to_double(param), m_ref(n, 0.0), v_ref(n, 0.0);
    const Cpu cpu;
    for (int64_t t = 1; t <= 5; ++t) {
      grad = random_floats(n, 10 + static_cast<uint32_t>(t));
      MH_AdamWArgs args{};
      args.struct_size = MH_STRUCT_SIZE(MH_AdamWArgs, step);
      args.param = view(param, {n});
      args.grad = view(grad, {n});
      args.m = view(m, {n});
      args.v = view(v, {n});
      args.lr = lr;
      args.beta1 = beta1;
      args.beta2 = beta2;
      args.eps = eps;
      args.weight_decay = wd;
      args.step = t;
      cpu.run(&MH_KernelsApi::adamw, args);
      for (int64_t i = 0; i < n; ++i) {
        m_ref[i] = beta1 * m_ref[i] + (1.0 - beta1) * grad[i];
        v_ref[i] = beta2 * v_ref[i] + (1.0 - beta2) * grad[i] * grad[i];
        const double m_hat = m_ref[i] / (1.0 - std::pow(double{beta1}, t));
        const double v_hat = v_ref[i] / (1.0 - std::pow(double{beta2}, t));
        p_ref[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * p_ref[i]);
      }
    }
    EXPECT_TRUE(all_close(param, p_ref, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(m, m_ref, 1e-5, 1e-7));
    EXPECT_TRUE(all_close(v, v_ref, 1e-5, 1e-9));
  }
}

MH_SumSquaresArgs sum_squares_args(MH_Tensor x, std::vector<float>& out) {
  MH_SumSquaresArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_SumSquaresArgs, out);
  args.x = x;
  args.out = view(out, {1});
  return args;
}

TEST(SumSquares, AccumulatesIntoOut) {
  for (int64_t n : {101, 100001}) {
    std::vector<float> x = random_floats(n, 2), out = {1.5f};
    double expected = 1.5;
    for (float v : x) expected += static_cast<double>(v) * v;
    Cpu().run(&MH_KernelsApi::sum_squares, sum_squares_args(view(x, {n}), out));
    EXPECT_NEAR(out[0], expected, 1e-6 * expected) << n;
  }
}

TEST(SumSquares, OfNothingAddsNothing) {
  std::vector<float> out = {2.0f};
  Cpu().run(&MH_KernelsApi::sum_squares, sum_squares_args(view(nullptr, MH_F32, {0}), out));
  EXPECT_EQ(out[0], 2.0f);
}

}  // namespace
}  // namespace mh::kernels::test
